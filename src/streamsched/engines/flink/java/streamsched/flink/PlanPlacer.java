/*
 * streamsched's placement plans for Flink 2.3's adaptive scheduler (our own code; see
 * docs/engines.md, "Applying a placement to a running Flink job").
 *
 * Plan location: the JobManager JVM option -Dstreamsched.flink.placement=PATH or the environment
 * variable STREAMSCHED_FLINK_PLACEMENT=PATH; PATH is one plan file or a directory of *.json plan
 * files. It is re-read at every assignment (submission, rescale, failover restart). A plan is
 *
 *   {"format": "streamsched.flink-placement/1", "job_id": "<hex>" or null, "job_name": "...",
 *    "vertices": {"<JobVertexID hex>": {"name": "...", "taskmanagers": ["<resource id or host>", ...]}}}
 *
 * with one TaskManager per subtask index. The plan for a job is the one whose job_id is the job's
 * id, else one without job_id whose job_name is the job's name. Subtasks are packed into slots per
 * TaskManager and slot sharing group: the k-th subtask of a vertex on a TaskManager goes to that
 * TaskManager's k-th slot of the group, so a slot holds at most one subtask of each vertex (Flink's
 * slot sharing rule) and a TaskManager needs, per group, as many slots as its most numerous vertex
 * there. The answer is checked (every subtask exactly once, slots distinct and the job's, one
 * subtask of a vertex per slot, groups within one slot sharing group) before it is returned;
 * otherwise the reason is logged and null returned (the caller then assigns as Flink does). Each
 * decision is also written as JSON next to the plans ("<dir>/<job id>.status.json" or
 * "<file>.status.json") for `streamsched apply flink`, with the job's slots per TaskManager as the
 * JobMaster held them ("held": a TaskManager the JobMaster dropped is missing there while the
 * ResourceManager still lists it until its heartbeat times out).
 */
package streamsched.flink;

import org.apache.flink.runtime.jobgraph.JobVertexID;
import org.apache.flink.runtime.jobmanager.scheduler.SlotSharingGroup;
import org.apache.flink.runtime.jobmaster.slotpool.PhysicalSlot;
import org.apache.flink.runtime.scheduler.adaptive.JobGraphJobInformation;
import org.apache.flink.runtime.scheduler.adaptive.JobSchedulingPlan.SlotAssignment;
import org.apache.flink.runtime.scheduler.adaptive.allocator.JobInformation;
import org.apache.flink.runtime.scheduler.adaptive.allocator.SlotSharingSlotAllocator.ExecutionSlotSharingGroup;
import org.apache.flink.runtime.scheduler.adaptive.allocator.VertexParallelism;
import org.apache.flink.runtime.scheduler.strategy.ExecutionVertexID;
import org.apache.flink.runtime.taskmanager.TaskManagerLocation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

public final class PlanPlacer {

    public static final String PROPERTY = "streamsched.flink.placement";
    public static final String ENVIRONMENT = "STREAMSCHED_FLINK_PLACEMENT";
    public static final String FORMAT = "streamsched.flink-placement/1";

    private static final Logger LOG = LoggerFactory.getLogger(PlanPlacer.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    private PlanPlacer() {}

    /** The configured plan file or directory, or null. */
    public static String location() {
        String path = System.getProperty(PROPERTY);
        if (path == null || path.isEmpty()) {
            path = System.getenv(ENVIRONMENT);
        }
        return path == null || path.isEmpty() ? null : path;
    }

    /** Why a plan is not used: logged, written to the status file, and the default assignment follows. */
    private static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message);
        }
    }

    /** The slot assignments the job's plan asks for, or null (no plan, or a plan that cannot be honoured). */
    public static Collection<SlotAssignment> place(JobInformation job, Collection<PhysicalSlot> freeSlots,
                                                   VertexParallelism parallelism) {
        String location = location();
        if (location == null) {
            return null;
        }
        String jobId = null;
        String jobName = null;
        if (job instanceof JobGraphJobInformation) {
            jobId = ((JobGraphJobInformation) job).getJobID().toHexString();
            jobName = ((JobGraphJobInformation) job).getName();
        }
        File plan = null;
        ObjectNode status = JSON.createObjectNode();
        status.put("job_id", jobId);
        status.put("job_name", jobName);
        status.put("time_ms", System.currentTimeMillis());
        status.put("slots", freeSlots.size());
        ObjectNode held = status.putObject("held");  // the job's slots per TaskManager, as this JobMaster holds them
        for (PhysicalSlot slot : freeSlots) {
            String tm = slot.getTaskManagerLocation().getResourceID().getResourceIdString();
            held.put(tm, held.path(tm).asInt(0) + 1);
        }
        try {
            Map.Entry<File, JsonNode> found = findPlan(new File(location), jobId, jobName);
            if (found == null) {
                status.put("applied", false);
                status.put("reason", "no plan for job " + jobId + " (" + jobName + ") in " + location);
                LOG.info("streamsched: {}; assigning slots as Flink does", status.get("reason").asText());
                writeStatus(new File(location), jobId, status);
                return null;
            }
            plan = found.getKey();
            status.put("plan", plan.getPath());
            List<SlotAssignment> assignments = assign(found.getValue(), job, freeSlots, parallelism, status);
            check(assignments, job, freeSlots, parallelism);
            status.put("applied", true);
            LOG.info("streamsched: job {} ({}) placed as planned in {}: {} slots", jobId, jobName, plan,
                    assignments.size());
            writeStatus(new File(location), jobId, status);
            return assignments;
        } catch (Refused | IOException | RuntimeException e) {
            String reason = e instanceof Refused ? e.getMessage() : e.getClass().getSimpleName() + ": " + e.getMessage();
            status.put("applied", false);
            status.put("reason", reason);
            LOG.warn("streamsched: plan {} not used for job {} ({}): {}; assigning slots as Flink does",
                    plan == null ? location : plan, jobId, jobName, reason);
            writeStatus(new File(location), jobId, status);
            return null;
        }
    }

    private static Map.Entry<File, JsonNode> findPlan(File location, String jobId, String jobName)
            throws IOException, Refused {
        List<File> files = new ArrayList<>();
        if (location.isDirectory()) {
            File[] listed = location.listFiles((dir, name) -> name.endsWith(".json") && !name.endsWith(".status.json"));
            if (listed != null) {
                Arrays.sort(listed);
                files.addAll(Arrays.asList(listed));
            }
        } else if (location.isFile()) {
            files.add(location);
        } else {
            return null;
        }
        Map.Entry<File, JsonNode> byName = null;
        for (File file : files) {
            JsonNode plan;
            try {
                plan = JSON.readTree(file);
            } catch (IOException e) {
                throw new Refused(file + ": not JSON (" + e.getMessage().split("\n")[0] + ")");
            }
            if (plan == null || !FORMAT.equals(plan.path("format").asText())) {
                throw new Refused(file + ": format is not " + FORMAT);
            }
            JsonNode id = plan.get("job_id");
            if (id != null && !id.isNull()) {
                if (id.asText().equals(jobId)) {
                    return Map.entry(file, plan);
                }
            } else if (byName == null && jobName != null && jobName.equals(plan.path("job_name").asText(null))) {
                byName = Map.entry(file, plan);
            }
        }
        return byName;
    }

    private static List<SlotAssignment> assign(JsonNode plan, JobInformation job, Collection<PhysicalSlot> freeSlots,
                                               VertexParallelism parallelism, ObjectNode status) throws Refused {
        if (!job.getCoLocationGroups().isEmpty()) {
            throw new Refused("the job has co-location groups (iterations), which plans do not describe");
        }
        JsonNode vertices = plan.path("vertices");
        if (!vertices.isObject()) {
            throw new Refused("plan has no \"vertices\" object");
        }
        // the job's slots per TaskManager, in physical slot order
        Map<String, List<PhysicalSlot>> slotsOf = new TreeMap<>();
        for (PhysicalSlot slot : freeSlots) {
            slotsOf.computeIfAbsent(slot.getTaskManagerLocation().getResourceID().getResourceIdString(),
                    k -> new ArrayList<>()).add(slot);
        }
        slotsOf.values().forEach(l -> l.sort(Comparator.comparingInt(PhysicalSlot::getPhysicalSlotNumber)));
        Set<String> known = new HashSet<>();
        ObjectNode placed = status.putObject("taskmanagers");
        // per TaskManager, per slot sharing group: the k-th slot's subtasks
        Map<String, Map<SlotSharingGroup, List<Set<ExecutionVertexID>>>> groups = new TreeMap<>();
        for (SlotSharingGroup sharing : job.getSlotSharingGroups()) {
            for (JobVertexID vertex : sharing.getJobVertexIds()) {
                String vid = vertex.toHexString();
                known.add(vid);
                String name = job.getVertexInformation(vertex).getVertexName();
                JsonNode targets = vertices.path(vid).path("taskmanagers");
                if (!targets.isArray()) {
                    throw new Refused("vertex " + vid + " (" + name + ") is not in the plan");
                }
                int n = parallelism.getParallelism(vertex);
                if (targets.size() != n) {
                    throw new Refused("vertex " + vid + " (" + name + ") runs " + n + " subtasks, the plan places "
                            + targets.size());
                }
                ArrayNode where = placed.putArray(vid);
                Map<String, Integer> onTaskManager = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    String tm = resolve(targets.get(i).asText(), slotsOf, vid, name, i);
                    where.add(tm);
                    int k = onTaskManager.merge(tm, 1, Integer::sum) - 1;
                    List<Set<ExecutionVertexID>> slots =
                            groups.computeIfAbsent(tm, t -> new LinkedHashMap<>()).computeIfAbsent(sharing, s -> new ArrayList<>());
                    while (slots.size() <= k) {
                        slots.add(new HashSet<>());
                    }
                    slots.get(k).add(new ExecutionVertexID(vertex, i));
                }
            }
        }
        Iterator<String> names = vertices.fieldNames();
        while (names.hasNext()) {
            String vid = names.next();
            if (!known.contains(vid)) {
                throw new Refused("the plan names vertex " + vid + ", which the job does not have");
            }
        }
        List<SlotAssignment> assignments = new ArrayList<>();
        for (Map.Entry<String, Map<SlotSharingGroup, List<Set<ExecutionVertexID>>>> tm : groups.entrySet()) {
            int needed = tm.getValue().values().stream().mapToInt(List::size).sum();
            List<PhysicalSlot> slots = slotsOf.get(tm.getKey());
            if (needed > slots.size()) {
                throw new Refused("TaskManager " + tm.getKey() + " needs " + needed
                        + " slots (one subtask of a vertex per slot), the job holds " + slots.size() + " there");
            }
            Iterator<PhysicalSlot> free = slots.iterator();
            for (Map.Entry<SlotSharingGroup, List<Set<ExecutionVertexID>>> sharing : tm.getValue().entrySet()) {
                for (Set<ExecutionVertexID> members : sharing.getValue()) {
                    assignments.add(new SlotAssignment(free.next(), new ExecutionSlotSharingGroup(sharing.getKey(), members)));
                }
            }
        }
        return assignments;
    }

    /** A TaskManager resource id among the job's slots; else a host (or address) of the job's TaskManagers. */
    private static String resolve(String target, Map<String, List<PhysicalSlot>> slotsOf, String vid, String name,
                                  int subtask) throws Refused {
        if (slotsOf.containsKey(target)) {
            return target;
        }
        String best = null;
        for (Map.Entry<String, List<PhysicalSlot>> tm : slotsOf.entrySet()) {
            TaskManagerLocation where = tm.getValue().get(0).getTaskManagerLocation();
            if (target.equals(where.getHostname()) || target.equals(where.getFQDNHostname())
                    || target.equals(where.addressString())) {
                if (best == null || tm.getValue().size() > slotsOf.get(best).size()) {
                    best = tm.getKey();
                }
            }
        }
        if (best == null) {
            throw new Refused("subtask " + subtask + " of vertex " + vid + " (" + name + ") goes to TaskManager "
                    + target + ", where the job holds no slot (it holds slots on " + slotsOf.keySet() + ")");
        }
        return best;
    }

    /** The answer Flink will act on: anything else would fail the job or stop the JobManager. */
    static void check(List<SlotAssignment> assignments, JobInformation job, Collection<PhysicalSlot> freeSlots,
                      VertexParallelism parallelism) throws Refused {
        Set<Object> slotIds = new HashSet<>();
        for (PhysicalSlot slot : freeSlots) {
            slotIds.add(slot.getAllocationId());
        }
        Set<Object> used = new HashSet<>();
        Set<ExecutionVertexID> seen = new HashSet<>();
        for (SlotAssignment assignment : assignments) {
            if (!slotIds.contains(assignment.getSlotInfo().getAllocationId())) {
                throw new Refused("slot " + assignment.getSlotInfo().getAllocationId() + " is not one of the job's");
            }
            if (!used.add(assignment.getSlotInfo().getAllocationId())) {
                throw new Refused("slot " + assignment.getSlotInfo().getAllocationId() + " used twice");
            }
            ExecutionSlotSharingGroup group = assignment.getTargetAs(ExecutionSlotSharingGroup.class);
            Set<JobVertexID> inSlot = new HashSet<>();
            for (ExecutionVertexID member : group.getContainedExecutionVertices()) {
                if (!group.getSlotSharingGroup().getJobVertexIds().contains(member.getJobVertexId())) {
                    throw new Refused(member + " is outside its slot's slot sharing group");
                }
                if (!inSlot.add(member.getJobVertexId())) {
                    throw new Refused("two subtasks of vertex " + member.getJobVertexId() + " in one slot");
                }
                if (!seen.add(member)) {
                    throw new Refused("subtask " + member + " placed twice");
                }
            }
        }
        int expected = 0;
        for (JobInformation.VertexInformation vertex : job.getVertices()) {
            int n = parallelism.getParallelism(vertex.getJobVertexID());
            expected += n;
            for (int i = 0; i < n; i++) {
                if (!seen.contains(new ExecutionVertexID(vertex.getJobVertexID(), i))) {
                    throw new Refused("subtask " + i + " of vertex " + vertex.getJobVertexID() + " is in no slot");
                }
            }
        }
        if (seen.size() != expected) {
            throw new Refused("the answer holds " + seen.size() + " subtasks, the job runs " + expected);
        }
    }

    private static void writeStatus(File location, String jobId, ObjectNode status) {
        File target = location.isDirectory() ? new File(location, (jobId == null ? "unknown" : jobId) + ".status.json")
                : new File(location.getPath() + ".status.json");
        try {
            Path tmp = Files.createTempFile(target.getAbsoluteFile().getParentFile().toPath(), ".status", ".tmp");
            JSON.writerWithDefaultPrettyPrinter().writeValue(tmp.toFile(), status);
            Files.move(tmp, target.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            LOG.warn("streamsched: cannot write {}: {}", target, e.toString());
        }
    }
}
