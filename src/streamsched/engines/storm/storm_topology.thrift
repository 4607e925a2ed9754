# The part of Apache Storm's storm.thrift (storm-client/src/storm.thrift) that a topology stored
# by Nimbus (<id>-stormcode.ser) holds: the field ids and types of StormTopology and the structs
# it contains, written here from that file's declarations. Nothing else is declared.

namespace py storm_topology

struct JavaObjectArg {
  1: i32 int_arg;
  2: i64 long_arg;
  3: string string_arg;
  4: bool bool_arg;
  5: binary binary_arg;
  6: double double_arg;
}

struct JavaObject {
  1: string full_class_name;
  2: list<JavaObjectArg> args_list;
}

struct NullStruct {
}

struct GlobalStreamId {
  1: string componentId;
  2: string streamId;
}

struct Grouping {
  1: list<string> fields;
  2: NullStruct shuffle;
  3: NullStruct all;
  4: NullStruct none;
  5: NullStruct direct;
  6: JavaObject custom_object;
  7: binary custom_serialized;
  8: NullStruct local_or_shuffle;
}

struct StreamInfo {
  1: list<string> output_fields;
  2: bool direct;
}

struct ShellComponent {
  1: string execution_command;
  2: string script;
}

struct ComponentObject {
  1: binary serialized_java;
  2: ShellComponent shell;
  3: JavaObject java_object;
}

struct ComponentCommon {
  1: map<GlobalStreamId, Grouping> inputs;
  2: map<string, StreamInfo> streams;
  3: i32 parallelism_hint;
  4: string json_conf;
}

struct SpoutSpec {
  1: ComponentObject spout_object;
  2: ComponentCommon common;
}

struct Bolt {
  1: ComponentObject bolt_object;
  2: ComponentCommon common;
}

struct StateSpoutSpec {
  1: ComponentObject state_spout_object;
  2: ComponentCommon common;
}

struct SharedMemory {
  1: string name;
  2: double on_heap;
  3: double off_heap_worker;
  4: double off_heap_node;
}

struct StormTopology {
  1: map<string, SpoutSpec> spouts;
  2: map<string, Bolt> bolts;
  3: map<string, StateSpoutSpec> state_spouts;
  4: list<binary> worker_hooks;
  5: list<string> dependency_jars;
  6: list<string> dependency_artifacts;
  7: string storm_version;
  8: string jdk_version;
  9: map<string, set<string>> component_to_shared_memory;
  10: map<string, SharedMemory> shared_memory;
}
