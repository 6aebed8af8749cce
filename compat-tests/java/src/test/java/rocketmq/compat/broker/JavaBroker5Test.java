package rocketmq.compat.broker;

import java.util.stream.Stream;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.params.provider.Arguments;
import rocketmq.compat.runtime.Versions;

@DisplayName("Java broker 5.x with the name server")
class JavaBroker5Test extends JavaBrokerWithNameServerTest {
    @Override
    String brokerVersion() {
        return Versions.JAVA_5;
    }

    @Override
    Stream<Arguments> clients() {
        return Stream.of(Arguments.of(Versions.JAVA_49, "JSON"), Arguments.of(Versions.JAVA_5, "ROCKETMQ"));
    }
}
