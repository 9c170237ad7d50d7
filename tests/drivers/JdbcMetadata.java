// pgjdbc's DatabaseMetaData against a running Eddy (issue 14): getTables,
// getColumns, getPrimaryKeys, getIndexInfo, getImportedKeys,
// getExportedKeys, getCrossReference, getSchemas, getTypeInfo, getCatalogs.
// Run as a single-file program (java -cp postgresql.jar JdbcMetadata.java).
// Every expected row is what pgjdbc 42.7 returns against PostgreSQL 15
// (scripts/ci/drivers-against-postgres.sh runs this file there too); with
// EDDY_DUMP=1 the program prints the rows it gets instead of checking them.
import java.sql.*;
import java.util.*;

public class JdbcMetadata {
    static boolean dump = System.getenv("EDDY_DUMP") != null;
    static int failures = 0;

    static Connection connect() throws SQLException {
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("EDDY_PORT") + "/"
            + (System.getenv("EDDY_DB") == null ? "eddy" : System.getenv("EDDY_DB")) + "?sslmode=disable";
        String user = System.getenv("EDDY_USER") == null ? "eddy" : System.getenv("EDDY_USER");
        String pw = System.getenv("EDDY_PASSWORD") == null ? "secret" : System.getenv("EDDY_PASSWORD");
        return DriverManager.getConnection(url, user, pw);
    }

    /// Every row of `rs` as "v1|v2|...", NULL for SQL NULL.
    static List<String> rows(ResultSet rs) throws SQLException {
        List<String> out = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            StringBuilder b = new StringBuilder();
            for (int c = 1; c <= n; c++) {
                if (c > 1) b.append('|');
                String v = rs.getString(c);
                b.append(v == null ? "NULL" : v);
            }
            out.add(b.toString());
        }
        rs.close();
        return out;
    }

    static String header(ResultSet rs) throws SQLException {
        ResultSetMetaData m = rs.getMetaData();
        StringBuilder b = new StringBuilder();
        for (int c = 1; c <= m.getColumnCount(); c++) {
            if (c > 1) b.append('|');
            b.append(m.getColumnLabel(c));
        }
        return b.toString();
    }

    /// Checks the column labels and every row of a metadata result set.
    static void expect(String what, ResultSet rs, String head, String... want) throws SQLException {
        String h = header(rs);
        List<String> got = rows(rs);
        if (dump) {
            System.out.println("== " + what);
            System.out.println("   \"" + h + "\",");
            for (String r : got) System.out.println("   \"" + r + "\",");
            return;
        }
        if (!h.equals(head)) {
            System.err.println("FAIL: " + what + " columns\n  got:  " + h + "\n  want: " + head);
            failures++;
        }
        if (!got.equals(Arrays.asList(want))) {
            System.err.println("FAIL: " + what + " rows");
            for (String r : got) System.err.println("  got:  " + r);
            for (String r : want) System.err.println("  want: " + r);
            failures++;
        }
    }

    /// Only the rows whose first `key` cells match one of `keys` (for
    /// result sets that list every type or database).
    static void expectSome(String what, ResultSet rs, int keyCol, Set<String> keys, String head,
                           String... want) throws SQLException {
        String h = header(rs);
        List<String> got = new ArrayList<>();
        for (String r : rows(rs)) {
            if (keys.contains(r.split("\\|", -1)[keyCol])) got.add(r);
        }
        if (dump) {
            System.out.println("== " + what);
            System.out.println("   \"" + h + "\",");
            for (String r : got) System.out.println("   \"" + r + "\",");
            return;
        }
        if (!h.equals(head)) {
            System.err.println("FAIL: " + what + " columns\n  got:  " + h + "\n  want: " + head);
            failures++;
        }
        if (!got.equals(Arrays.asList(want))) {
            System.err.println("FAIL: " + what + " rows");
            for (String r : got) System.err.println("  got:  " + r);
            for (String r : want) System.err.println("  want: " + r);
            failures++;
        }
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = connect()) {
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS jm_child");
                s.execute("DROP TABLE IF EXISTS jm_parent");
                s.execute("CREATE TABLE jm_parent (a int, b varchar(10), name text NOT NULL, "
                    + "code bigint, price numeric(10,2), PRIMARY KEY (b, a))");
                s.execute("CREATE INDEX jm_parent_name_idx ON jm_parent (name)");
                s.execute("CREATE UNIQUE INDEX jm_parent_code_key ON jm_parent (code DESC)");
                s.execute("CREATE TABLE jm_child (id bigint PRIMARY KEY, pa int, pb varchar(10), "
                    + "note text, CONSTRAINT jm_child_parent_fk FOREIGN KEY (pb, pa) "
                    + "REFERENCES jm_parent (b, a) ON DELETE CASCADE)");
            }
            DatabaseMetaData md = c.getMetaData();
            // The checks go here (filled in from PostgreSQL's answers).
            run(c, md);
        }
        if (failures > 0) {
            System.exit(1);
        }
        if (!dump) System.out.println("pgjdbc metadata: ok");
    }

    static void run(Connection c, DatabaseMetaData md) throws SQLException {
        expect("getTables", md.getTables(null, "public", "jm_%", null), "");
        expect("getTables TABLE", md.getTables(null, "public", "jm_%", new String[] {"TABLE"}), "");
        expect("getColumns", md.getColumns(null, "public", "jm_%", "%"), "");
        expect("getPrimaryKeys parent", md.getPrimaryKeys(null, "public", "jm_parent"), "");
        expect("getPrimaryKeys child", md.getPrimaryKeys(null, "public", "jm_child"), "");
        expect("getIndexInfo", md.getIndexInfo(null, "public", "jm_parent", false, false), "");
        expect("getIndexInfo unique", md.getIndexInfo(null, "public", "jm_parent", true, false), "");
        expect("getImportedKeys", md.getImportedKeys(null, "public", "jm_child"), "");
        expect("getExportedKeys", md.getExportedKeys(null, "public", "jm_parent"), "");
        expect("getCrossReference",
               md.getCrossReference(null, "public", "jm_parent", null, "public", "jm_child"), "");
        expect("getSchemas", md.getSchemas(), "");
        expect("getSchemas pattern", md.getSchemas(null, "pub%"), "");
        expect("getCatalogs", md.getCatalogs(), "");
        expectSome("getTypeInfo", md.getTypeInfo(), 0,
                   new HashSet<>(Arrays.asList("bool", "int2", "int4", "int8", "text", "varchar",
                                               "numeric", "float8", "timestamptz", "bytea", "_int4")),
                   "");
    }
}
