// pgjdbc in a JVM whose default zone is Europe/Berlin: pgjdbc sends that
// zone as the startup TimeZone, and java.sql.Timestamp, LocalDateTime,
// OffsetDateTime and dates round-trip as they do against PostgreSQL 15.
// Run as a single-file program (java JdbcTimeZone.java).
import java.sql.*;
import java.time.*;
import java.util.TimeZone;

public class JdbcTimeZone {
    static void check(boolean cond, String what) {
        if (!cond) {
            System.err.println("FAIL: " + what);
            System.exit(1);
        }
    }

    static String text(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    public static void main(String[] args) throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("Europe/Berlin"));
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("EDDY_PORT") + "/"
            + (System.getenv("EDDY_DB") == null ? "eddy" : System.getenv("EDDY_DB"))
            + "?sslmode=disable&prepareThreshold=1";
        String user = System.getenv("EDDY_USER") == null ? "eddy" : System.getenv("EDDY_USER");
        String pw = System.getenv("EDDY_PASSWORD") == null ? "secret" : System.getenv("EDDY_PASSWORD");
        try (Connection c = DriverManager.getConnection(url, user, pw)) {
            check(text(c, "SHOW TimeZone").equals("Europe/Berlin"), "the JVM's zone is the session's");
            check(text(c, "SELECT (timestamptz '2024-06-01 08:00+00')::text").equals("2024-06-01 10:00:00+02"),
                "text on Berlin's wall clock");
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS jdbc_tz");
                s.execute("CREATE TABLE jdbc_tz (id int PRIMARY KEY, at timestamptz, local_at timestamp, d date)");
            }
            Instant instant = Instant.parse("2024-06-01T08:00:00Z");
            LocalDateTime wall = LocalDateTime.of(2024, 6, 1, 10, 0);
            try (PreparedStatement p = c.prepareStatement("INSERT INTO jdbc_tz VALUES (?, ?, ?, ?)")) {
                // java.sql.Timestamp: an instant, written in the JVM's zone
                p.setInt(1, 1);
                p.setTimestamp(2, Timestamp.from(instant));
                p.setTimestamp(3, Timestamp.valueOf(wall));
                p.setDate(4, Date.valueOf(LocalDate.of(2024, 6, 1)));
                p.executeUpdate();
                // java.time: OffsetDateTime and LocalDateTime
                p.setInt(1, 2);
                p.setObject(2, OffsetDateTime.ofInstant(instant, ZoneOffset.UTC));
                p.setObject(3, wall);
                p.setObject(4, LocalDate.of(2024, 6, 1));
                p.executeUpdate();
                // a LocalDateTime into the timestamptz column: Berlin's wall clock
                p.setInt(1, 3);
                p.setObject(2, wall);
                p.setObject(3, wall);
                p.setObject(4, LocalDate.of(2024, 6, 1));
                p.executeUpdate();
            }
            try (PreparedStatement q = c.prepareStatement(
                    "SELECT at, local_at, d, at::date, date_trunc('day', at) FROM jdbc_tz WHERE id = ?")) {
                for (int id = 1; id <= 3; id++) {
                    q.setInt(1, id);
                    try (ResultSet rs = q.executeQuery()) {
                        check(rs.next(), "row " + id);
                        check(rs.getTimestamp(1).toInstant().equals(instant), "instant of row " + id + ": " + rs.getTimestamp(1));
                        check(rs.getObject(1, OffsetDateTime.class).toInstant().equals(instant), "OffsetDateTime of row " + id);
                        check(rs.getObject(2, LocalDateTime.class).equals(wall), "wall clock of row " + id);
                        check(rs.getObject(3, LocalDate.class).equals(LocalDate.of(2024, 6, 1)), "date of row " + id);
                        check(rs.getObject(4, LocalDate.class).equals(LocalDate.of(2024, 6, 1)), "local date of row " + id);
                        check(rs.getTimestamp(5).toInstant().equals(Instant.parse("2024-05-31T22:00:00Z")),
                            "local midnight of row " + id + ": " + rs.getTimestamp(5));
                    }
                }
            }
            try (PreparedStatement q = c.prepareStatement("SELECT count(*) FROM jdbc_tz WHERE at = ?")) {
                q.setObject(1, OffsetDateTime.of(2024, 6, 1, 10, 0, 0, 0, ZoneOffset.ofHours(2)));
                try (ResultSet rs = q.executeQuery()) {
                    rs.next();
                    check(rs.getLong(1) == 3, "lookup by an OffsetDateTime");
                }
            }
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE jdbc_tz");
            }
        }
        System.out.println("pgjdbc time zones: ok");
    }
}
