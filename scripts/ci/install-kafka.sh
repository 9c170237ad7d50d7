#!/usr/bin/env bash
# Installs Apache Kafka (broker, KRaft mode) from Maven Central into
# target/kafka/ (git-ignored): the jars of org.apache.kafka:kafka_2.13 and
# its runtime dependencies, run with the installed Java 17:
#
#   java -cp 'target/kafka/*' kafka.Kafka server.properties
#
# The Kafka end-to-end test (crates/server/tests/stream_kafka.rs) starts a
# single-node KRaft broker from these jars. Idempotent: a second run only
# checks (no network). Needs mvn and java; without them it prints a notice
# and the Kafka test skips (fails in CI, where EDDY_REQUIRE_KAFKA=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
DEST=target/kafka
STAMP="$DEST/.installed-$KAFKA_VERSION"

if [ -f "$STAMP" ]; then
  echo "kafka $KAFKA_VERSION: $DEST"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  echo "notice: mvn or java missing; the Kafka tests cannot run"
  exit 0
fi
mkdir -p "$DEST"
POM="$(mktemp -d)/pom.xml"
cat >"$POM" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eddy.ci</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
rm -f "$DEST"/*.jar
mvn -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="$(pwd)/$DEST" >/dev/null
rm -rf "$(dirname "$POM")"
ls "$DEST"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null
touch "$STAMP"
echo "kafka $KAFKA_VERSION: $DEST"
