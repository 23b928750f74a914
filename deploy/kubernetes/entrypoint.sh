#!/bin/bash
# Entry point of the sparkmirror image (deploy/kubernetes/Dockerfile).
#
# `executor`: what Spark on Kubernetes runs in each executor pod. Spark passes that one argument and
# describes the executor in environment variables (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...; the
# JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...); this starts Spark's executor backend for
# Kubernetes with them, from the Spark inside the installed pyspark package.
# Anything else runs as given: the driver's pod runs `sparkmirror run /etc/sparkmirror/mm2.properties`.
set -euo pipefail

if [[ "${1:-}" != executor ]]; then
  exec "$@"
fi

java_opts=()
for name in $(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n); do
  java_opts+=("${!name}")
done
memory="${SPARK_EXECUTOR_MEMORY:-1g}"
exec java "-Xms${memory}" "-Xmx${memory}" "${java_opts[@]}" \
  -cp "${SPARK_CONF_DIR:-/opt/spark/conf}:${SPARK_HOME}/jars/*" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "${SPARK_DRIVER_URL}" \
  --executor-id "${SPARK_EXECUTOR_ID}" \
  --cores "${SPARK_EXECUTOR_CORES}" \
  --app-id "${SPARK_APPLICATION_ID}" \
  --hostname "${SPARK_EXECUTOR_POD_IP}" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
  --podName "${SPARK_EXECUTOR_POD_NAME}"
