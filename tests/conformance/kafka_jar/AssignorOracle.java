// Runs Kafka's own server-side assignors (RangeAssignor, UniformAssignor from the broker's
// kafka-group-coordinator jar) on cases read from stdin, one JSON answer per case on stdout.
// Used by tests/conformance/test_kafka_jar_assignors.py. A case:
//   assignor range|uniform
//   type HOMOGENEOUS|HETEROGENEOUS        (optional: derived from the subscriptions)
//   topic <base64 uuid> <partitions>
//   member <id> <instance id or -> <topic,topic or -> <topic=p.p;topic=p or ->
//   ---
// Members go into a HashMap in the order given, as the broker's TargetAssignmentBuilder builds it.
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

public class AssignorOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        List<String> block = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("---")) {
                System.out.println(run(block));
                block.clear();
            } else if (!line.isBlank()) {
                block.add(line);
            }
        }
        if (!block.isEmpty()) System.out.println(run(block));
    }

    static String run(List<String> lines) {
        String assignorName = "uniform";
        String type = null;
        Map<Uuid, Integer> counts = new HashMap<>();
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        Set<Set<Uuid>> subscriptions = new HashSet<>();
        for (String l : lines) {
            String[] f = l.trim().split(" ");
            if (f[0].equals("assignor")) assignorName = f[1];
            else if (f[0].equals("type")) type = f[1];
            else if (f[0].equals("topic")) counts.put(Uuid.fromString(f[1]), Integer.parseInt(f[2]));
            else if (f[0].equals("member")) {
                Optional<String> instance = f[2].equals("-") ? Optional.empty() : Optional.of(f[2]);
                Set<Uuid> topics = new HashSet<>();
                if (!f[3].equals("-")) for (String t : f[3].split(",")) topics.add(Uuid.fromString(t));
                subscriptions.add(topics);
                Map<Uuid, Set<Integer>> owned = new LinkedHashMap<>();
                if (!f[4].equals("-")) {
                    for (String tp : f[4].split(";")) {
                        String[] kv = tp.split("=");
                        Set<Integer> ps = new HashSet<>();
                        for (String p : kv[1].split("\\.")) ps.add(Integer.parseInt(p));
                        owned.put(Uuid.fromString(kv[0]), ps);
                    }
                }
                members.put(f[1], new MemberSubscriptionAndAssignmentImpl(Optional.empty(), instance, topics,
                    owned.isEmpty() ? Assignment.EMPTY : new Assignment(owned)));
            }
        }
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        members.forEach((id, m) -> m.partitions().forEach((t, ps) -> {
            for (Integer p : ps) inverted.computeIfAbsent(t, k -> new HashMap<>()).put(p, id);
        }));
        SubscriptionType kind = type != null ? SubscriptionType.valueOf(type)
            : subscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        GroupSpec spec = new GroupSpecImpl(members, kind, inverted);
        SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
            public int numPartitions(Uuid topicId) {
                return counts.getOrDefault(topicId, -1);
            }

            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return Set.of();
            }
        };
        ConsumerGroupPartitionAssignor assignor =
            assignorName.equals("range") ? new RangeAssignor() : new UniformAssignor();
        try {
            GroupAssignment result = assignor.assign(spec, describer);
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<String, MemberAssignment> e : new TreeMap<>(result.members()).entrySet()) {
                TreeMap<String, TreeSet<Integer>> byTopic = new TreeMap<>();
                e.getValue().partitions().forEach((t, ps) -> {
                    if (!ps.isEmpty()) byTopic.put(t.toString(), new TreeSet<>(ps));
                });
                if (byTopic.isEmpty()) continue;
                if (out.length() > 1) out.append(", ");
                out.append('"').append(e.getKey()).append("\": {");
                String sep = "";
                for (Map.Entry<String, TreeSet<Integer>> te : byTopic.entrySet()) {
                    out.append(sep).append('"').append(te.getKey()).append("\": ").append(te.getValue());
                    sep = ", ";
                }
                out.append('}');
            }
            return out.append('}').toString();
        } catch (Exception e) {
            return "{\"error\": \"" + e.getClass().getSimpleName() + "\"}";
        }
    }
}
