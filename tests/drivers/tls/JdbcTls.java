// pgjdbc with sslmode=require against an Eddy started with --tls-cert and
// --tls-key (the server refuses nothing in clear; a server without TLS makes
// this connection fail). Run as a single-file program (java JdbcTls.java).
import java.sql.*;

public class JdbcTls {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("EDDY_PORT") + "/eddy?sslmode=require";
        String user = System.getenv("EDDY_USER") == null ? "eddy" : System.getenv("EDDY_USER");
        String pw = System.getenv("EDDY_PASSWORD") == null ? "secret" : System.getenv("EDDY_PASSWORD");
        try (Connection c = DriverManager.getConnection(url, user, pw);
             PreparedStatement s = c.prepareStatement("SELECT ?::int + 1")) {
            s.setInt(1, 41);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                if (rs.getInt(1) != 42) {
                    System.err.println("FAIL: SELECT over TLS returned " + rs.getInt(1));
                    System.exit(1);
                }
            }
        }
        System.out.println("pgjdbc tls: ok");
    }
}
