#!/bin/sh
# Starts the jvm-actors target: `java <the JVM flags below> $JAVA_OPTS -jar target/jvm-actors.jar ARGS`.
# Plans start it through this script (plans/proxy-pool-jvm.toml). When Java or the built jar
# is missing, it says so with the command that fixes it and exits 3, which the plan declares
# as `unavailable_exit`: the configuration is reported unavailable on this machine and the
# run goes on.
#
#   JAVA=/path/to/java    the java to run (default: java on PATH)
#   JAVA_OPTS="..."       more JVM flags, after the defaults (so they win)
#   LOADLAB_JVM_JAR=...   another jar (default: target/jvm-actors.jar beside this script)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jar=${LOADLAB_JVM_JAR:-$here/target/jvm-actors.jar}
java=${JAVA:-java}
unavailable=3
build="mvn -q -B -f $here/pom.xml package -DskipTests"

# Both causes are said when both hold (no Java and no jar): fixing one must not reveal the
# other only on the next try.
missing=0
if ! command -v "$java" >/dev/null 2>&1; then
  echo "jvm-actors: no Java here ('$java' not found): install a JDK 11 or newer (Debian: apt-get install default-jdk-headless maven), then build the jar: $build" >&2
  missing=1
fi
if [ ! -f "$jar" ]; then
  if [ -n "${LOADLAB_JVM_JAR:-}" ]; then
    echo "jvm-actors: $jar (LOADLAB_JVM_JAR) is not built; the build of this checkout's jar is: $build" >&2
  else
    echo "jvm-actors: $jar is not built; build it with: $build" >&2
  fi
  missing=1
fi
[ "$missing" = 0 ] || exit "$unavailable"
# `java -version` prints `openjdk version "17.0.15" ...` (or "1.8.0_392" for Java 8).
version=$("$java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
major=${version%%.*}
[ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)
case "$major" in
  ''|*[!0-9]*) major=0 ;;
esac
if [ "$major" -lt 11 ]; then
  echo "jvm-actors: '$java' is Java '${version:-unknown}'; the jar needs Java 11 or newer (Debian: apt-get install default-jdk-headless)" >&2
  exit "$unavailable"
fi

# The JVM flags of the benchmark, on purpose (the README's "JVM flags" says why):
#   -Xms256m -Xmx256m        a fixed heap: no resizing during a run, the same heap whatever the RAM
#   -XX:+AlwaysPreTouch      the heap's pages are touched at start, not during the first requests
#   -XX:+UseG1GC             the collector named: ergonomics would pick Serial on a JVM pinned to one CPU
#   -XX:+ExitOnOutOfMemoryError   a full heap ends the process (a crash the lab sees), not a wedged JVM
#   -Xlog:...:stderr         JVM warnings and one line per GC pause in the target's log; stdout
#                            carries only the ready line
exec "$java" \
  -Xms256m -Xmx256m -XX:+AlwaysPreTouch -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError \
  -Xlog:all=warning:stderr -Xlog:gc:stderr \
  ${JAVA_OPTS:-} -jar "$jar" "$@"
