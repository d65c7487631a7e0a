package loadlab.jvmactors;

import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.event.Logging;

/**
 * Pekko's log events on stderr: stdout carries only the ready line, which tools read.
 */
public final class StderrLogger extends AbstractActor {
    @Override
    public Receive createReceive() {
        return receiveBuilder()
            .match(Logging.InitializeLogger.class, m -> getSender().tell(Logging.loggerInitialized(), getSelf()))
            .match(Logging.LogEvent.class, e -> System.err.println(
                "jvm-actors: pekko " + levelName(e.level()) + " [" + e.logSource() + "] " + e.message()))
            .build();
    }

    private static String levelName(int level) {
        switch (level) {
            case 1:
                return "ERROR";
            case 2:
                return "WARN";
            case 3:
                return "INFO";
            default:
                return "DEBUG";
        }
    }
}
