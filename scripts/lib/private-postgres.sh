# Sourced by scripts that compare Eddy with a private PostgreSQL cluster.
# Sets PGBIN (the newest installed server binaries), WORK (a temporary
# directory, world-readable so user postgres can use it, with pg/ and sock/
# inside), PGRUN (the prefix that runs PostgreSQL's binaries as user
# postgres when this script runs as root: PostgreSQL refuses root), and
# free_port. The caller installs its own EXIT trap (stop_postgres helps).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
WORK=$(mktemp -d)
chmod 755 "$WORK"
PGRUN=()
if [ "$(id -u)" = 0 ]; then PGRUN=(runuser -u postgres --); fi
mkdir -p "$WORK/pg" "$WORK/sock"
if [ ${#PGRUN[@]} -gt 0 ]; then chown postgres "$WORK/pg" "$WORK/sock"; fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_postgres() {
  "${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" stop -m immediate >/dev/null 2>&1 || true
}
