package rocketmq.compat.broker;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.stream.Collectors;

/**
 * One scrape of a Prometheus text exposition ({@code GET /metrics}): its samples, {@code name{labels} value
 * [timestamp]} lines; comments ({@code # TYPE}, {@code # HELP}) and blank lines are skipped, so what is compared
 * is the sample names, label keys, label values and values, not how a TYPE line names a family or whether a
 * value prints as 3 or 3.0.
 */
public final class Exposition {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(TIMEOUT).build();

    /** One sample line. */
    public record Sample(String name, SortedMap<String, String> labels, double value) {
        @Override
        public String toString() {
            return name + labels + " " + value;
        }
    }

    private final String text;
    private final List<Sample> samples;

    private Exposition(String text, List<Sample> samples) {
        this.text = text;
        this.samples = samples;
    }

    /** GET http://127.0.0.1:port/metrics; fails unless it answers 200. */
    public static Exposition scrape(int port) throws IOException, InterruptedException {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
            .timeout(TIMEOUT).GET().build();
        HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() != 200) {
            throw new IOException("GET /metrics on port " + port + " answered " + response.statusCode());
        }
        return parse(response.body());
    }

    public static Exposition parse(String text) {
        List<Sample> samples = new ArrayList<>();
        int lineNo = 0;
        for (String line : text.split("\n")) {
            lineNo++;
            String l = line.strip();
            if (l.isEmpty() || l.startsWith("#")) {
                continue;
            }
            try {
                samples.add(parseLine(l));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("line " + lineNo + " of the exposition is not a sample: " + line, e);
            }
        }
        return new Exposition(text, Collections.unmodifiableList(samples));
    }

    private static Sample parseLine(String line) {
        int i = 0;
        while (i < line.length() && line.charAt(i) != '{' && line.charAt(i) != ' ') {
            i++;
        }
        String name = line.substring(0, i);
        SortedMap<String, String> labels = new TreeMap<>();
        if (i < line.length() && line.charAt(i) == '{') {
            i++;
            while (line.charAt(i) != '}') {
                int eq = line.indexOf('=', i);
                String key = line.substring(i, eq).strip();
                if (line.charAt(eq + 1) != '"') {
                    throw new IllegalArgumentException("label " + key + " has no quoted value");
                }
                StringBuilder value = new StringBuilder();
                int j = eq + 2;
                for (; line.charAt(j) != '"'; j++) {
                    char c = line.charAt(j);
                    if (c == '\\') {
                        char next = line.charAt(++j);
                        value.append(next == 'n' ? '\n' : next);
                    } else {
                        value.append(c);
                    }
                }
                labels.put(key, value.toString());
                i = j + 1;
                if (line.charAt(i) == ',') {
                    i++;
                }
            }
            i++;
        }
        String[] rest = line.substring(i).strip().split("\\s+");
        return new Sample(name, labels, parseValue(rest[0]));
    }

    private static double parseValue(String v) {
        return switch (v) {
            case "+Inf", "Inf" -> Double.POSITIVE_INFINITY;
            case "-Inf" -> Double.NEGATIVE_INFINITY;
            case "NaN" -> Double.NaN;
            default -> Double.parseDouble(v);
        };
    }

    /** The body as served. */
    public String text() {
        return text;
    }

    public List<Sample> samples() {
        return samples;
    }

    /** Every sample name. */
    public SortedSet<String> names() {
        return samples.stream().map(Sample::name).collect(Collectors.toCollection(TreeSet::new));
    }

    /** The samples named {@code name} whose labels include every entry of {@code match}. */
    public List<Sample> samples(String name, Map<String, String> match) {
        return samples.stream()
            .filter(s -> s.name().equals(name) && s.labels().entrySet().containsAll(match.entrySet()))
            .toList();
    }

    /** The sum of the values of {@link #samples(String, Map)}, or NaN if there is none. */
    public double sum(String name, Map<String, String> match) {
        List<Sample> found = samples(name, match);
        return found.isEmpty() ? Double.NaN : found.stream().mapToDouble(Sample::value).sum();
    }

    /** The label-key sets the samples named {@code name} carry. */
    public Set<SortedSet<String>> labelKeySets(String name) {
        return samples.stream().filter(s -> s.name().equals(name))
            .map(s -> (SortedSet<String>) new TreeSet<>(s.labels().keySet()))
            .collect(Collectors.toCollection(() -> new TreeSet<>(Exposition::compareSets)));
    }

    /** The values label {@code key} takes in the samples named {@code name}. */
    public SortedSet<String> labelValues(String name, String key) {
        return labelValues(name, key, s -> true);
    }

    /** The values label {@code key} takes in the samples named {@code name} that {@code which} accepts. */
    public SortedSet<String> labelValues(String name, String key, Predicate<Sample> which) {
        return samples.stream().filter(s -> s.name().equals(name) && s.labels().containsKey(key) && which.test(s))
            .map(s -> s.labels().get(key)).collect(Collectors.toCollection(TreeSet::new));
    }

    /** Orders label-key sets by their printed form, so sets of them print the same way every time. */
    static int compareSets(SortedSet<String> a, SortedSet<String> b) {
        return a.toString().compareTo(b.toString());
    }

    /** The sample lines whose text contains {@code fragment}, for failure messages. */
    public String grep(String fragment) {
        return text.lines().filter(l -> !l.startsWith("#") && l.contains(fragment)).collect(Collectors.joining("\n"));
    }
}
