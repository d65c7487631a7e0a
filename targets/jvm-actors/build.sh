#!/bin/sh
# Builds the jvm-actors target: `mvn -q -B -f pom.xml package -DskipTests` beside this script,
# which makes target/jvm-actors.jar (the dependencies come from Maven Central into ~/.m2 the
# first time). Plans build it through this script (plans/proxy-pool-jvm.toml's `build`, run
# by `loadlab lab` before the first configuration): when Maven or a JDK 11 or newer is
# missing, it says so, with how to install them, and exits 3, and the plan stops there.
#
#   JAVA_HOME=...   the JDK Maven uses (default: the java on PATH, as Maven picks it)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
install="apt-get install default-jdk-headless maven"

if ! command -v mvn >/dev/null 2>&1; then
  echo "jvm-actors: no Maven here ('mvn' not found): install Maven and a JDK 11 or newer (Debian: $install)" >&2
  exit 3
fi
if [ -n "${JAVA_HOME:-}" ]; then
  java=$JAVA_HOME/bin/java
  javac=$JAVA_HOME/bin/javac
else
  java=java
  javac=javac
fi
if ! command -v "$java" >/dev/null 2>&1; then
  echo "jvm-actors: no Java here ('$java' not found): install a JDK 11 or newer (Debian: $install)" >&2
  exit 3
fi
# `java -version` prints `openjdk version "17.0.15" ...` (or "1.8.0_392" for Java 8).
version=$("$java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
major=${version%%.*}
[ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)
case "$major" in
  ''|*[!0-9]*) major=0 ;;
esac
if [ "$major" -lt 11 ]; then
  echo "jvm-actors: '$java' is Java '${version:-unknown}'; the jar needs a JDK 11 or newer (Debian: $install)" >&2
  exit 3
fi
if ! command -v "$javac" >/dev/null 2>&1; then
  echo "jvm-actors: '$java' is a Java runtime without a compiler ('$javac' not found): install a JDK (Debian: $install)" >&2
  exit 3
fi

echo "mvn -q -B -f $here/pom.xml package -DskipTests"
exec mvn -q -B -f "$here/pom.xml" package -DskipTests
