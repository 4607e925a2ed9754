/*
 * streamsched's replacement of Flink 2.3's adaptive-scheduler slot assigner (our own code).
 *
 * A jar holding this class placed before flink-dist on the JobManager's class path is the
 * DefaultSlotAssigner that SlotSharingSlotAllocator creates at submission, at every rescale and at
 * every failover restart. Without a streamsched plan for the job it assigns exactly as Flink 2.3's
 * own class: check the minimum slots, let the configured SlotSharingResolver form the execution
 * slot sharing groups, pick slots on the fewest TaskManagers in application mode when preferred,
 * and let the configured SlotMatchingResolver match groups and slots (so
 * taskmanager.load-balance.mode keeps its meaning). With a plan it places each subtask on the
 * TaskManager the plan names (streamsched.flink.PlanPlacer), or logs why not and assigns as above.
 */
package org.apache.flink.runtime.scheduler.adaptive.allocator;

import org.apache.flink.runtime.clusterframework.types.ResourceID;
import org.apache.flink.runtime.jobmaster.slotpool.PhysicalSlot;
import org.apache.flink.runtime.scheduler.adaptive.JobSchedulingPlan.SlotAssignment;
import org.apache.flink.runtime.scheduler.adaptive.allocator.SlotSharingSlotAllocator.ExecutionSlotSharingGroup;
import org.apache.flink.runtime.util.EnvironmentInformation;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import streamsched.flink.PlanPlacer;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;

public class DefaultSlotAssigner implements SlotAssigner {

    private static final Logger LOG = LoggerFactory.getLogger(DefaultSlotAssigner.class);

    /** The Flink versions whose internal API this class was compiled against and tested on. */
    static final String SUPPORTED_VERSION_PREFIX = "2.3.";

    /** Flink's execution target of application mode (the only mode that picks fewest TaskManagers). */
    static final String APPLICATION_MODE_EXECUTION_TARGET = "embedded";

    static {
        String version = EnvironmentInformation.getVersion();
        if (!version.startsWith(SUPPORTED_VERSION_PREFIX)) {
            String message = "streamsched placement plugin: built for Flink " + SUPPORTED_VERSION_PREFIX
                    + "x, this JobManager runs Flink " + version
                    + "; remove the streamsched jar from the JobManager's class path";
            LOG.error(message);
            throw new IllegalStateException(message);
        }
        LOG.info("streamsched placement plugin loaded from {} (Flink {}); plan location: {}",
                DefaultSlotAssigner.class.getProtectionDomain().getCodeSource().getLocation(),
                version, PlanPlacer.location());
    }

    private final String executionTarget;
    private final boolean minimalTaskManagerPreferred;
    private final SlotSharingResolver slotSharingResolver;
    private final SlotMatchingResolver slotMatchingResolver;

    DefaultSlotAssigner(String executionTarget, boolean minimalTaskManagerPreferred,
                        SlotSharingResolver slotSharingResolver, SlotMatchingResolver slotMatchingResolver) {
        this.executionTarget = executionTarget;
        this.minimalTaskManagerPreferred = minimalTaskManagerPreferred;
        this.slotSharingResolver = slotSharingResolver;
        this.slotMatchingResolver = slotMatchingResolver;
    }

    @Override
    public Collection<SlotAssignment> assignSlots(JobInformation jobInformation, Collection<PhysicalSlot> freeSlots,
                                                  VertexParallelism vertexParallelism,
                                                  JobAllocationsInformation previousAllocations) {
        AllocatorUtil.checkMinimumRequiredSlots(jobInformation, freeSlots);
        Collection<SlotAssignment> planned = PlanPlacer.place(jobInformation, freeSlots, vertexParallelism);
        if (planned != null) {
            return planned;
        }
        return flinkDefault(jobInformation, freeSlots, vertexParallelism);
    }

    /** Flink 2.3's own assignment (what this class does without a plan). */
    private Collection<SlotAssignment> flinkDefault(JobInformation jobInformation, Collection<PhysicalSlot> freeSlots,
                                                    VertexParallelism vertexParallelism) {
        Collection<ExecutionSlotSharingGroup> groups =
                slotSharingResolver.getExecutionSlotSharingGroups(jobInformation, vertexParallelism);
        Collection<PhysicalSlot> slots = freeSlots;
        if (APPLICATION_MODE_EXECUTION_TARGET.equalsIgnoreCase(executionTarget) && minimalTaskManagerPreferred
                && freeSlots.size() > groups.size()) {
            slots = onFewestTaskManagers(AllocatorUtil.getSlotsPerTaskExecutor(freeSlots), groups.size());
        }
        return slotMatchingResolver.matchSlotSharingGroupWithSlots(groups, slots);
    }

    /** Whole TaskManagers, those with the most of the job's slots first, until n slots are taken. */
    private static Collection<PhysicalSlot> onFewestTaskManagers(Map<ResourceID, Set<PhysicalSlot>> byTaskManager,
                                                                 int n) {
        List<ResourceID> order = new ArrayList<>(byTaskManager.keySet());
        order.sort(Comparator.comparingInt((ResourceID id) -> byTaskManager.get(id).size()).reversed());
        List<PhysicalSlot> picked = new ArrayList<>();
        for (int i = 0; picked.size() < n; i++) {
            picked.addAll(byTaskManager.get(order.get(i)));
        }
        return picked;
    }
}
