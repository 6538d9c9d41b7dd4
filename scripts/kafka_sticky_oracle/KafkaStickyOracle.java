// Runs Kafka's own CooperativeStickyAssignor (kafka-clients on the classpath) on cases read from stdin
// and prints its assignments, for scripts/kafka_sticky_diff.py. Not part of the build or the test suite.
//
// Input, one case per block:   case
//                              topic <name> <partitions>
//                              member <id> <generation> <topic,topic|-> <topic:partition,...|-> <user-data generation|->
//                              end
// Output per case: one line per member in input order, "<id> <topic:partition,...|->", then "end".
// Subscriptions go into a HashMap in input order, as ConsumerCoordinator.onLeaderElected builds them.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.TopicPartition;

public class KafkaStickyOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Map<String, Integer> topics = null;
        Map<String, Subscription> subs = null;
        List<String> order = null;
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case":
                    topics = new HashMap<>();
                    subs = new HashMap<>();
                    order = new ArrayList<>();
                    break;
                case "topic":
                    topics.put(f[1], Integer.parseInt(f[2]));
                    break;
                case "member":
                    List<String> ts = f[3].equals("-") ? new ArrayList<>() : new ArrayList<>(Arrays.asList(f[3].split(",")));
                    List<TopicPartition> owned = new ArrayList<>();
                    if (!f[4].equals("-"))
                        for (String tp : f[4].split(",")) {
                            int i = tp.lastIndexOf(':');
                            owned.add(new TopicPartition(tp.substring(0, i), Integer.parseInt(tp.substring(i + 1))));
                        }
                    ByteBuffer userData = null;
                    if (!f[5].equals("-")) {  // what CooperativeStickyAssignor.subscriptionUserData writes
                        userData = ByteBuffer.allocate(4).putInt(Integer.parseInt(f[5]));
                        userData.flip();
                    }
                    subs.put(f[1], new Subscription(ts, userData, owned, Integer.parseInt(f[2]), Optional.empty()));
                    order.add(f[1]);
                    break;
                case "end":
                    Map<String, List<TopicPartition>> result = new CooperativeStickyAssignor().assign(topics, subs);
                    for (String m : order) {
                        List<String> parts = new ArrayList<>();
                        for (TopicPartition tp : result.get(m))
                            parts.add(tp.topic() + ":" + tp.partition());
                        out.append(m).append(' ').append(parts.isEmpty() ? "-" : String.join(",", parts)).append('\n');
                    }
                    out.append("end\n");
                    break;
                default:
                    break;
            }
        }
        System.out.print(out);
    }
}
