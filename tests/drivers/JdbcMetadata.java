// pgjdbc's DatabaseMetaData against a running Eddy (issue 14): getTables,
// getColumns, getPrimaryKeys, getIndexInfo, getImportedKeys,
// getExportedKeys, getCrossReference, getSchemas, getTypeInfo, getCatalogs,
// getTablePrivileges, getColumnPrivileges, getBestRowIdentifier,
// getVersionColumns, getTableTypes, getSQLKeywords.
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

    /// Only the rows whose cell `keyCol` is one of `keys` (for result sets
    /// that list every type).
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
                s.execute("DROP TABLE IF EXISTS jm_grand");
                s.execute("DROP TABLE IF EXISTS jm_child");
                s.execute("DROP TABLE IF EXISTS jm_parent");
                s.execute("CREATE TABLE jm_parent (a int, b varchar(10), name text NOT NULL, "
                    + "code bigint, price numeric(10,2), PRIMARY KEY (b, a))");
                s.execute("CREATE INDEX jm_parent_name_idx ON jm_parent (name)");
                s.execute("CREATE UNIQUE INDEX jm_parent_code_key ON jm_parent (code DESC)");
                s.execute("CREATE TABLE jm_child (id bigint PRIMARY KEY, pa int, pb varchar(10), "
                    + "note text, CONSTRAINT jm_child_parent_fk FOREIGN KEY (pb, pa) "
                    + "REFERENCES jm_parent (b, a) ON DELETE CASCADE)");
                s.execute("CREATE TABLE jm_grand (gid int PRIMARY KEY, \"ChildId\" bigint, "
                    + "CONSTRAINT jm_grand_child_fk FOREIGN KEY (\"ChildId\") REFERENCES jm_child "
                    + "ON UPDATE RESTRICT ON DELETE SET NULL)");
                s.execute("CREATE UNIQUE INDEX \"JmGrandChild\" ON jm_grand (\"ChildId\")");
            }
            DatabaseMetaData md = c.getMetaData();
            run(c, md);
        }
        if (failures > 0) {
            System.exit(1);
        }
        if (!dump) System.out.println("pgjdbc metadata: ok");
    }

    static final Set<String> TYPES = new HashSet<>(Arrays.asList(
        "bool", "int2", "int4", "int8", "text", "varchar", "numeric", "float8", "timestamptz",
        "bytea", "_int4"));

    static void run(Connection c, DatabaseMetaData md) throws SQLException {
        // Every expectation below is PostgreSQL 15's answer (pgjdbc 42.7.14,
        // EDDY_DUMP=1 against a private PostgreSQL 15.x); Eddy answers the same.
        // indexes are listed as INDEX, ordered by TABLE_TYPE, schema, name
        expect("getTables", md.getTables(null, "public", "jm_%", null),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|TABLE_TYPE|REMARKS|TYPE_CAT|TYPE_SCHEM|TYPE_NAME|SELF_REFERENCING_COL_NAME|REF_GENERATION",
               "eddy|public|jm_child_pkey|INDEX|NULL|||||",
               "eddy|public|jm_grand_pkey|INDEX|NULL|||||",
               "eddy|public|jm_parent_code_key|INDEX|NULL|||||",
               "eddy|public|jm_parent_name_idx|INDEX|NULL|||||",
               "eddy|public|jm_parent_pkey|INDEX|NULL|||||",
               "eddy|public|jm_child|TABLE|NULL|||||",
               "eddy|public|jm_grand|TABLE|NULL|||||",
               "eddy|public|jm_parent|TABLE|NULL|||||");
        expect("getTables TABLE", md.getTables(null, "public", "jm_%", new String[] {"TABLE"}),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|TABLE_TYPE|REMARKS|TYPE_CAT|TYPE_SCHEM|TYPE_NAME|SELF_REFERENCING_COL_NAME|REF_GENERATION",
               "eddy|public|jm_child|TABLE|NULL|||||",
               "eddy|public|jm_grand|TABLE|NULL|||||",
               "eddy|public|jm_parent|TABLE|NULL|||||");
        // varchar(10): COLUMN_SIZE 10; numeric(10,2): 10 and DECIMAL_DIGITS 2;
        // NOT NULL and primary-key columns NULLABLE 0
        expect("getColumns", md.getColumns(null, "public", "jm_%", "%"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|COLUMN_NAME|DATA_TYPE|TYPE_NAME|COLUMN_SIZE|BUFFER_LENGTH|DECIMAL_DIGITS|NUM_PREC_RADIX|NULLABLE|REMARKS|COLUMN_DEF|SQL_DATA_TYPE|SQL_DATETIME_SUB|CHAR_OCTET_LENGTH|ORDINAL_POSITION|IS_NULLABLE|SCOPE_CATALOG|SCOPE_SCHEMA|SCOPE_TABLE|SOURCE_DATA_TYPE|IS_AUTOINCREMENT|IS_GENERATEDCOLUMN",
               "eddy|public|jm_child|id|-5|int8|19|NULL|0|10|0|NULL|NULL|NULL|NULL|NULL|1|NO|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_child|pa|4|int4|10|NULL|0|10|1|NULL|NULL|NULL|NULL|NULL|2|YES|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_child|pb|12|varchar|10|NULL|0|10|1|NULL|NULL|NULL|NULL|10|3|YES|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_child|note|12|text|2147483647|NULL|0|10|1|NULL|NULL|NULL|NULL|2147483647|4|YES|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_grand|gid|4|int4|10|NULL|0|10|0|NULL|NULL|NULL|NULL|NULL|1|NO|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_grand|ChildId|-5|int8|19|NULL|0|10|1|NULL|NULL|NULL|NULL|NULL|2|YES|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_parent|a|4|int4|10|NULL|0|10|0|NULL|NULL|NULL|NULL|NULL|1|NO|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_parent|b|12|varchar|10|NULL|0|10|0|NULL|NULL|NULL|NULL|10|2|NO|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_parent|name|12|text|2147483647|NULL|0|10|0|NULL|NULL|NULL|NULL|2147483647|3|NO|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_parent|code|-5|int8|19|NULL|0|10|1|NULL|NULL|NULL|NULL|NULL|4|YES|NULL|NULL|NULL|NULL|NO|NO",
               "eddy|public|jm_parent|price|2|numeric|10|NULL|2|10|1|NULL|NULL|NULL|NULL|NULL|5|YES|NULL|NULL|NULL|NULL|NO|NO");
        // PRIMARY KEY (b, a): KEY_SEQ follows the key's order, not the columns'
        // (information_schema._pg_expandarray(conkey))
        expect("getPrimaryKeys parent", md.getPrimaryKeys(null, "public", "jm_parent"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|COLUMN_NAME|KEY_SEQ|PK_NAME",
               "eddy|public|jm_parent|b|1|jm_parent_pkey",
               "eddy|public|jm_parent|a|2|jm_parent_pkey");
        expect("getPrimaryKeys child", md.getPrimaryKeys(null, "public", "jm_child"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|COLUMN_NAME|KEY_SEQ|PK_NAME",
               "eddy|public|jm_child|id|1|jm_child_pkey");
        // ordered by NON_UNIQUE, TYPE (3: other), INDEX_NAME, ORDINAL_POSITION;
        // code DESC is D (indoption[0] & 1); a new btree has 1 page
        expect("getIndexInfo", md.getIndexInfo(null, "public", "jm_parent", false, false),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|NON_UNIQUE|INDEX_QUALIFIER|INDEX_NAME|TYPE|ORDINAL_POSITION|COLUMN_NAME|ASC_OR_DESC|CARDINALITY|PAGES|FILTER_CONDITION|REMARKS",
               "eddy|public|jm_parent|f|NULL|jm_parent_code_key|3|1|code|D|0|1|NULL|NULL",
               "eddy|public|jm_parent|f|NULL|jm_parent_pkey|3|1|b|A|0|1|NULL|NULL",
               "eddy|public|jm_parent|f|NULL|jm_parent_pkey|3|2|a|A|0|1|NULL|NULL",
               "eddy|public|jm_parent|t|NULL|jm_parent_name_idx|3|1|name|A|0|1|NULL|NULL");
        expect("getIndexInfo unique", md.getIndexInfo(null, "public", "jm_parent", true, false),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|NON_UNIQUE|INDEX_QUALIFIER|INDEX_NAME|TYPE|ORDINAL_POSITION|COLUMN_NAME|ASC_OR_DESC|CARDINALITY|PAGES|FILTER_CONDITION|REMARKS",
               "eddy|public|jm_parent|f|NULL|jm_parent_code_key|3|1|code|D|0|1|NULL|NULL",
               "eddy|public|jm_parent|f|NULL|jm_parent_pkey|3|1|b|A|0|1|NULL|NULL",
               "eddy|public|jm_parent|f|NULL|jm_parent_pkey|3|2|a|A|0|1|NULL|NULL");
        // FOREIGN KEY (pb, pa) REFERENCES jm_parent (b, a) ON DELETE CASCADE:
        // UPDATE_RULE 3 (NO ACTION), DELETE_RULE 0 (CASCADE), DEFERRABILITY 7
        // (not deferrable); pg_constraint.conkey/confkey[pos.n]
        expect("getImportedKeys", md.getImportedKeys(null, "public", "jm_child"),
               "PKTABLE_CAT|PKTABLE_SCHEM|PKTABLE_NAME|PKCOLUMN_NAME|FKTABLE_CAT|FKTABLE_SCHEM|FKTABLE_NAME|FKCOLUMN_NAME|KEY_SEQ|UPDATE_RULE|DELETE_RULE|FK_NAME|PK_NAME|DEFERRABILITY",
               "eddy|public|jm_parent|b|eddy|public|jm_child|pb|1|3|0|jm_child_parent_fk|jm_parent_pkey|7",
               "eddy|public|jm_parent|a|eddy|public|jm_child|pa|2|3|0|jm_child_parent_fk|jm_parent_pkey|7");
        expect("getExportedKeys", md.getExportedKeys(null, "public", "jm_parent"),
               "PKTABLE_CAT|PKTABLE_SCHEM|PKTABLE_NAME|PKCOLUMN_NAME|FKTABLE_CAT|FKTABLE_SCHEM|FKTABLE_NAME|FKCOLUMN_NAME|KEY_SEQ|UPDATE_RULE|DELETE_RULE|FK_NAME|PK_NAME|DEFERRABILITY",
               "eddy|public|jm_parent|b|eddy|public|jm_child|pb|1|3|0|jm_child_parent_fk|jm_parent_pkey|7",
               "eddy|public|jm_parent|a|eddy|public|jm_child|pa|2|3|0|jm_child_parent_fk|jm_parent_pkey|7");
        expect("getCrossReference", 
               md.getCrossReference(null, "public", "jm_parent", null, "public", "jm_child"),
               "PKTABLE_CAT|PKTABLE_SCHEM|PKTABLE_NAME|PKCOLUMN_NAME|FKTABLE_CAT|FKTABLE_SCHEM|FKTABLE_NAME|FKCOLUMN_NAME|KEY_SEQ|UPDATE_RULE|DELETE_RULE|FK_NAME|PK_NAME|DEFERRABILITY",
               "eddy|public|jm_parent|b|eddy|public|jm_child|pb|1|3|0|jm_child_parent_fk|jm_parent_pkey|7",
               "eddy|public|jm_parent|a|eddy|public|jm_child|pa|2|3|0|jm_child_parent_fk|jm_parent_pkey|7");
        // ON UPDATE RESTRICT (1) ON DELETE SET NULL (2), a quoted column
        expect("getImportedKeys grand", md.getImportedKeys(null, "public", "jm_grand"),
               "PKTABLE_CAT|PKTABLE_SCHEM|PKTABLE_NAME|PKCOLUMN_NAME|FKTABLE_CAT|FKTABLE_SCHEM|FKTABLE_NAME|FKCOLUMN_NAME|KEY_SEQ|UPDATE_RULE|DELETE_RULE|FK_NAME|PK_NAME|DEFERRABILITY",
               "eddy|public|jm_child|id|eddy|public|jm_grand|ChildId|1|1|2|jm_grand_child_fk|jm_child_pkey|7");
        expect("getExportedKeys child", md.getExportedKeys(null, "public", "jm_child"),
               "PKTABLE_CAT|PKTABLE_SCHEM|PKTABLE_NAME|PKCOLUMN_NAME|FKTABLE_CAT|FKTABLE_SCHEM|FKTABLE_NAME|FKCOLUMN_NAME|KEY_SEQ|UPDATE_RULE|DELETE_RULE|FK_NAME|PK_NAME|DEFERRABILITY",
               "eddy|public|jm_child|id|eddy|public|jm_grand|ChildId|1|1|2|jm_grand_child_fk|jm_child_pkey|7");
        // a quoted index and column: pg_get_indexdef(oid, 1, false) is "ChildId",
        // which pgjdbc trims
        expect("getIndexInfo grand", md.getIndexInfo(null, "public", "jm_grand", false, false),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|NON_UNIQUE|INDEX_QUALIFIER|INDEX_NAME|TYPE|ORDINAL_POSITION|COLUMN_NAME|ASC_OR_DESC|CARDINALITY|PAGES|FILTER_CONDITION|REMARKS",
               "eddy|public|jm_grand|f|NULL|JmGrandChild|3|1|ChildId|A|0|1|NULL|NULL",
               "eddy|public|jm_grand|f|NULL|jm_grand_pkey|3|1|gid|A|0|1|NULL|NULL");
        expect("getPrimaryKeys grand", md.getPrimaryKeys(null, "public", "jm_grand"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|COLUMN_NAME|KEY_SEQ|PK_NAME",
               "eddy|public|jm_grand|gid|1|jm_grand_pkey");
        // pg_toast and pg_temp_* are not listed (Eddy has neither)
        expect("getSchemas", md.getSchemas(),
               "TABLE_SCHEM|TABLE_CATALOG",
               "information_schema|eddy",
               "pg_catalog|eddy",
               "public|eddy");
        expect("getSchemas pattern", md.getSchemas(null, "pub%"),
               "TABLE_SCHEM|TABLE_CATALOG",
               "public|eddy");
        // a few of the types both have (PostgreSQL lists hundreds more); PRECISION,
        // CASE_SENSITIVE etc. are pgjdbc's from the type's oid; _int4 is ARRAY (2003)
        // because its typinput is array_in
        expectSome("getTypeInfo", md.getTypeInfo(), 0, TYPES,
                   "TYPE_NAME|DATA_TYPE|PRECISION|LITERAL_PREFIX|LITERAL_SUFFIX|CREATE_PARAMS|NULLABLE|CASE_SENSITIVE|SEARCHABLE|UNSIGNED_ATTRIBUTE|FIXED_PREC_SCALE|AUTO_INCREMENT|LOCAL_TYPE_NAME|MINIMUM_SCALE|MAXIMUM_SCALE|SQL_DATA_TYPE|SQL_DATETIME_SUB|NUM_PREC_RADIX",
                   "bool|-7|0|'|'|NULL|1|f|3|t|f|f|NULL|0|0|NULL|NULL|10",
                   "int8|-5|0|NULL|NULL|NULL|1|f|3|f|f|f|NULL|0|0|NULL|NULL|10",
                   "bytea|-2|0|'|'|NULL|1|t|3|t|f|f|NULL|0|0|NULL|NULL|10",
                   "numeric|2|1000|NULL|NULL|NULL|1|f|3|f|f|f|NULL|0|1000|NULL|NULL|10",
                   "int4|4|0|NULL|NULL|NULL|1|f|3|f|f|f|NULL|0|0|NULL|NULL|10",
                   "int2|5|0|NULL|NULL|NULL|1|f|3|f|f|f|NULL|0|0|NULL|NULL|10",
                   "float8|8|0|NULL|NULL|NULL|1|f|3|f|f|f|NULL|0|0|NULL|NULL|10",
                   "text|12|0|'|'|NULL|1|t|3|t|f|f|NULL|0|0|NULL|NULL|10",
                   "varchar|12|10485760|'|'|NULL|1|t|3|t|f|f|NULL|0|0|NULL|NULL|10",
                   "timestamptz|93|6|'|'|NULL|1|f|3|t|f|f|NULL|0|0|NULL|NULL|10",
                   "_int4|2003|0|'|'|NULL|1|f|3|f|f|f|NULL|0|0|NULL|NULL|10");

        // the owner's privileges from relacl (NULL: the owner's defaults)
        expect("getTablePrivileges", md.getTablePrivileges(null, "public", "jm_parent"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|GRANTOR|GRANTEE|PRIVILEGE|IS_GRANTABLE",
               "eddy|public|jm_parent|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|eddy|eddy|UPDATE|YES");
        // no column grants (attacl NULL): the table's, per column
        expect("getColumnPrivileges", md.getColumnPrivileges(null, "public", "jm_parent", "%"),
               "TABLE_CAT|TABLE_SCHEM|TABLE_NAME|COLUMN_NAME|GRANTOR|GRANTEE|PRIVILEGE|IS_GRANTABLE",
               "eddy|public|jm_parent|a|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|a|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|a|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|a|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|a|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|a|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|a|eddy|eddy|UPDATE|YES",
               "eddy|public|jm_parent|b|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|b|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|b|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|b|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|b|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|b|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|b|eddy|eddy|UPDATE|YES",
               "eddy|public|jm_parent|code|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|code|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|code|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|code|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|code|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|code|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|code|eddy|eddy|UPDATE|YES",
               "eddy|public|jm_parent|name|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|name|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|name|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|name|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|name|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|name|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|name|eddy|eddy|UPDATE|YES",
               "eddy|public|jm_parent|price|eddy|eddy|DELETE|YES",
               "eddy|public|jm_parent|price|eddy|eddy|INSERT|YES",
               "eddy|public|jm_parent|price|eddy|eddy|REFERENCES|YES",
               "eddy|public|jm_parent|price|eddy|eddy|SELECT|YES",
               "eddy|public|jm_parent|price|eddy|eddy|TRIGGER|YES",
               "eddy|public|jm_parent|price|eddy|eddy|TRUNCATE|YES",
               "eddy|public|jm_parent|price|eddy|eddy|UPDATE|YES");
        // the primary key's columns
        expect("getBestRowIdentifier", md.getBestRowIdentifier(null, "public", "jm_parent",
                                            DatabaseMetaData.bestRowSession, true),
               "SCOPE|COLUMN_NAME|DATA_TYPE|TYPE_NAME|COLUMN_SIZE|BUFFER_LENGTH|DECIMAL_DIGITS|PSEUDO_COLUMN",
               "2|a|4|int4|10|NULL|0|1",
               "2|b|12|varchar|10|NULL|0|1");
        // pgjdbc answers ctid without a query
        expect("getVersionColumns", md.getVersionColumns(null, "public", "jm_parent"),
               "SCOPE|COLUMN_NAME|DATA_TYPE|TYPE_NAME|COLUMN_SIZE|BUFFER_LENGTH|DECIMAL_DIGITS|PSEUDO_COLUMN",
               "NULL|ctid|1111|tid|NULL|NULL|NULL|2");
        expect("getTableTypes", md.getTableTypes(),
               "TABLE_TYPE",
               "FOREIGN TABLE",
               "INDEX",
               "MATERIALIZED VIEW",
               "PARTITIONED INDEX",
               "PARTITIONED TABLE",
               "SEQUENCE",
               "SYSTEM INDEX",
               "SYSTEM TABLE",
               "SYSTEM TOAST INDEX",
               "SYSTEM TOAST TABLE",
               "SYSTEM VIEW",
               "TABLE",
               "TEMPORARY INDEX",
               "TEMPORARY SEQUENCE",
               "TEMPORARY TABLE",
               "TEMPORARY VIEW",
               "TYPE",
               "VIEW");

        // getSQLKeywords: PostgreSQL's keywords that are not SQL:2003's
        // (pg_get_keywords()): 1430 characters from "abort,access,aggregate,"
        String kw = md.getSQLKeywords();
        if (!dump && !(kw.length() == 1430 && kw.hashCode() == 912891437
                       && kw.startsWith("abort,access,aggregate,also,analyse,analyze,"))) {
            System.err.println("FAIL: getSQLKeywords " + kw.length() + " " + kw.hashCode() + " " + kw);
            failures++;
        }

        // getCatalogs: PostgreSQL 15 lists every database that allows
        // connections ("eddy", "postgres", "template1" on a fresh cluster);
        // Eddy has one database per server and no templates, so it lists
        // only "eddy". Both list the database connected to.
        List<String> catalogs = rows(md.getCatalogs());
        if (dump) {
            System.out.println("== getCatalogs");
            for (String r : catalogs) System.out.println("   \"" + r + "\",");
        } else if (!catalogs.contains(c.getCatalog())) {
            System.err.println("FAIL: getCatalogs " + catalogs + " lacks " + c.getCatalog());
            failures++;
        }
    }
}
