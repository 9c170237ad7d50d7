//! FOREIGN KEY constraints against the real server: the races that the row
//! locks decide (docs/design/foreign_keys.md, "Concurrency"), PostgreSQL's
//! messages and DETAIL lines, the fixed-plan fallback, COPY's checks and
//! the constraint surviving a restart. The single-connection behaviour is
//! tests/slt/foreign_keys.slt.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

mod common;
use common::*;

fn state(e: &tokio_postgres::Error) -> SqlState {
    e.code().cloned().unwrap_or(SqlState::INTERNAL_ERROR)
}

fn detail(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .and_then(|d| d.detail())
        .unwrap_or_default()
        .to_string()
}

/// Runs `sql` on `waiter` in a task, checks that it is still waiting after
/// 400 ms (`why`), ends `holder`'s transaction with `end` and returns what
/// the statement then answered.
async fn blocked_until(
    waiter: &Arc<Client>,
    sql: &'static str,
    holder: &Client,
    end: &str,
    why: &str,
) -> Result<u64, tokio_postgres::Error> {
    let task = {
        let waiter = Arc::clone(waiter);
        tokio::spawn(async move { waiter.execute(sql, &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!task.is_finished(), "{why}");
    holder.batch_execute(end).await.unwrap();
    task.await.unwrap()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

const SCHEMA: &str = "CREATE TABLE p (id INT PRIMARY KEY, v INT) WITH (shard_count = 2);
     CREATE TABLE c (id INT PRIMARY KEY, p_id INT REFERENCES p);
     CREATE TABLE cc (id INT PRIMARY KEY, p_id INT REFERENCES p ON DELETE CASCADE);
     INSERT INTO p VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)";

/// Txn A inserts a child of p=1 and stays open; B's DELETE of p=1 must
/// wait for A (the child's insert holds p=1's lock shared), then see A's
/// committed child and fail with 23503. Without the lock B would delete
/// p=1 under A's feet and both would commit: an orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_delete_waits_for_a_child_insert_then_fails() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(SCHEMA).await.unwrap();

    a.batch_execute("BEGIN; INSERT INTO c VALUES (10, 1)")
        .await
        .unwrap();
    let waited = blocked_until(
        &b,
        "DELETE FROM p WHERE id = 1",
        &a,
        "COMMIT",
        "the DELETE waits for the child's txn",
    )
    .await;
    let e = waited.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        e.as_db_error().map(|d| d.message().to_string()),
        Some(
            "update or delete on table \"p\" violates foreign key constraint \"c_p_id_fkey\" on table \"c\""
                .into()
        )
    );
    assert_eq!(
        detail(&e),
        "Key (id)=(1) is still referenced from table \"c\"."
    );
    assert_eq!(count(&a, "SELECT count(*) FROM p WHERE id = 1").await, 1);

    // lock_timeout bounds the wait (55P03), and nothing is deleted
    a.batch_execute("BEGIN; INSERT INTO c VALUES (11, 2)")
        .await
        .unwrap();
    b.batch_execute("SET lock_timeout = '200ms'").await.unwrap();
    let e = b
        .execute("DELETE FROM p WHERE id = 2", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE);
    b.batch_execute("SET lock_timeout = 0").await.unwrap();
    // the child's txn rolls back: the parent may go
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        b.execute("DELETE FROM p WHERE id = 2", &[]).await.unwrap(),
        1
    );

    // the same race through a fixed plan (extended protocol, by key): it
    // must take the checked path
    a.batch_execute("BEGIN; INSERT INTO c VALUES (12, 3)")
        .await
        .unwrap();
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.execute("DELETE FROM p WHERE id = $1", &[&3i32]).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiter.is_finished(), "the fixed-plan DELETE waits too");
    a.batch_execute("COMMIT").await.unwrap();
    let e = waiter.await.unwrap().unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        count(&a, "SELECT count(*) FROM c JOIN p ON p.id = c.p_id").await,
        count(&a, "SELECT count(*) FROM c WHERE p_id IS NOT NULL").await
    );
}

/// The reverse order: B deletes p=4 and stays open; A's child insert
/// must wait for B, then find p=4 gone (23503); if B rolls back, A's
/// insert goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_insert_waits_for_a_parent_delete() {
    let srv = Server::start("trust");
    let a = Arc::new(srv.connect().await);
    let b = srv.connect().await;
    b.batch_execute(SCHEMA).await.unwrap();

    b.batch_execute("BEGIN; DELETE FROM p WHERE id = 4")
        .await
        .unwrap();
    let waited = blocked_until(
        &a,
        "INSERT INTO c VALUES (20, 4)",
        &b,
        "COMMIT",
        "the child insert waits for the delete",
    )
    .await;
    let e = waited.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(detail(&e), "Key (p_id)=(4) is not present in table \"p\".");

    // rolled back: the insert proceeds once the delete is undone
    b.batch_execute("BEGIN; DELETE FROM p WHERE id = 5")
        .await
        .unwrap();
    let waited = blocked_until(
        &a,
        "INSERT INTO c VALUES (21, 5)",
        &b,
        "ROLLBACK",
        "the statement waits",
    )
    .await;
    assert_eq!(waited.unwrap(), 1);

    // a child UPDATE onto a parent being deleted waits too
    b.batch_execute("INSERT INTO p VALUES (6, 0); BEGIN; DELETE FROM p WHERE id = 6")
        .await
        .unwrap();
    let waited = blocked_until(
        &a,
        "UPDATE c SET p_id = 6 WHERE id = 21",
        &b,
        "COMMIT",
        "the statement waits",
    )
    .await;
    let e = waited.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
}

/// A CASCADE sees children committed after its snapshot: B's DELETE of
/// p=1 waits for A's child insert, then deletes that child too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascade_deletes_children_committed_while_it_waited() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(SCHEMA).await.unwrap();
    a.batch_execute("INSERT INTO cc VALUES (1, 1)")
        .await
        .unwrap();

    a.batch_execute("BEGIN; INSERT INTO cc VALUES (2, 1)")
        .await
        .unwrap();
    let waited = blocked_until(
        &b,
        "DELETE FROM p WHERE id = 1",
        &a,
        "COMMIT",
        "the statement waits",
    )
    .await;
    assert_eq!(waited.unwrap(), 1);
    assert_eq!(count(&a, "SELECT count(*) FROM cc").await, 0);

    // REPEATABLE READ: a child committed after the snapshot fails the
    // cascade with 40001 rather than deleting a row it never saw
    b.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM p")
        .await
        .unwrap();
    a.batch_execute("INSERT INTO cc VALUES (3, 2)")
        .await
        .unwrap();
    let e = b
        .execute("DELETE FROM p WHERE id = 2", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::T_R_SERIALIZATION_FAILURE);
    b.batch_execute("ROLLBACK").await.unwrap();
}

/// COPY into a referencing table checks every row as INSERT does: an
/// orphan fails the whole COPY with 23503 (PostgreSQL's message and
/// DETAIL) and loads nothing, outside a block and inside one; valid rows
/// load. The constraint survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_checks_every_row_and_constraints_survive_a_restart() {
    use futures::SinkExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let mut srv = Server::start_in(None, path.clone(), "trust");
    let a = srv.connect().await;
    a.batch_execute(SCHEMA).await.unwrap();
    async fn copy(a: &Client, data: &'static str) -> Result<u64, tokio_postgres::Error> {
        let sink = a.copy_in::<_, bytes::Bytes>("COPY c FROM STDIN").await?;
        let mut sink = Box::pin(sink);
        sink.send(bytes::Bytes::from_static(data.as_bytes()))
            .await?;
        sink.as_mut().finish().await
    }
    let e = copy(&a, "1\t1\n2\t99\n").await.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        e.as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default(),
        "insert or update on table \"c\" violates foreign key constraint \"c_p_id_fkey\""
    );
    assert_eq!(detail(&e), "Key (p_id)=(99) is not present in table \"p\".");
    let n: i64 = a
        .query_one("SELECT count(*) FROM c", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a failed COPY loads nothing");
    assert_eq!(copy(&a, "1\t1\n2\t2\n3\t\\N\n").await.unwrap(), 3);
    a.batch_execute("BEGIN").await.unwrap();
    let e = copy(&a, "4\t42\n").await.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    a.batch_execute("ROLLBACK; BEGIN").await.unwrap();
    assert_eq!(copy(&a, "4\t4\n").await.unwrap(), 1);
    a.batch_execute("COMMIT").await.unwrap();
    let n: i64 = a
        .query_one("SELECT count(*) FROM c", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 4);
    a.batch_execute("DELETE FROM c").await.unwrap();
    drop(a);
    srv.stop();

    let srv = Server::start_in(None, path, "trust");
    let a = srv.connect().await;
    let e = a
        .execute("INSERT INTO c VALUES (1, 99)", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    a.execute("INSERT INTO c VALUES (1, 1)", &[]).await.unwrap();
    let e = a.batch_execute("DROP TABLE p").await.unwrap_err();
    assert_eq!(state(&e), SqlState::DEPENDENT_OBJECTS_STILL_EXIST);
    assert_eq!(
        detail(&e),
        "constraint c_p_id_fkey on table c depends on table p\nconstraint cc_p_id_fkey on table cc depends on table p"
    );
    drop(dir);
}

/// ALTER TABLE ADD FOREIGN KEY (issue 14): PostgreSQL's message and DETAIL
/// for an orphan found by the validation, the refusals CREATE TABLE makes
/// too, and no orphan committing around the validation (it holds the
/// parent's table lock, so a parent DELETE waits for it, and it waits for
/// a parent DELETE already running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_add_foreign_key_validates_and_locks_the_parent() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(
        "CREATE TABLE p (id INT PRIMARY KEY, u INT UNIQUE);
         CREATE TABLE c (id INT PRIMARY KEY, p_id INT);
         INSERT INTO p VALUES (1, 1), (2, 2), (3, 3);
         INSERT INTO c VALUES (10, 1), (11, 5)",
    )
    .await
    .unwrap();

    let e = a
        .batch_execute("ALTER TABLE c ADD CONSTRAINT n FOREIGN KEY (p_id) REFERENCES p (id)")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        e.as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default(),
        "insert or update on table \"c\" violates foreign key constraint \"n\""
    );
    assert_eq!(detail(&e), "Key (p_id)=(5) is not present in table \"p\".");
    let e = a
        .batch_execute("ALTER TABLE c ADD FOREIGN KEY (p_id) REFERENCES p")
        .await
        .unwrap_err();
    assert_eq!(
        e.as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default(),
        "insert or update on table \"c\" violates foreign key constraint \"c_p_id_fkey\""
    );
    a.batch_execute("DELETE FROM c WHERE id = 11")
        .await
        .unwrap();

    // what CREATE TABLE refuses, ALTER TABLE refuses the same way
    for (sql, what) in [
        (
            "ALTER TABLE c ADD FOREIGN KEY (p_id) REFERENCES p MATCH FULL",
            "MATCH FULL",
        ),
        (
            "ALTER TABLE c ADD FOREIGN KEY (p_id) REFERENCES p NOT VALID",
            "NOT VALID",
        ),
        (
            "ALTER TABLE c ADD FOREIGN KEY (p_id) REFERENCES p (u)",
            "UNIQUE",
        ),
        (
            "ALTER TABLE c ADD FOREIGN KEY (p_id) REFERENCES p ON UPDATE CASCADE",
            "ON UPDATE",
        ),
    ] {
        let e = a.batch_execute(sql).await.unwrap_err();
        assert_eq!(state(&e), SqlState::FEATURE_NOT_SUPPORTED, "{sql}: {e:?}");
        let msg = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert!(msg.contains(what), "{sql}: {msg}");
    }
    assert_eq!(
        count(&a, "SELECT count(*) FROM pg_constraint WHERE contype = 'f'").await,
        0
    );

    // the ALTER holds the parent's lock: a DELETE of a referenced parent
    // row waits for it, then sees the committed constraint
    a.batch_execute("BEGIN; ALTER TABLE c ADD CONSTRAINT n FOREIGN KEY (p_id) REFERENCES p (id)")
        .await
        .unwrap();
    let waited = blocked_until(
        &b,
        "DELETE FROM p WHERE id = 1",
        &a,
        "COMMIT",
        "the parent DELETE waits for the ALTER",
    )
    .await;
    let e = waited.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    a.batch_execute("ALTER TABLE c DROP CONSTRAINT n")
        .await
        .unwrap();

    // a DELETE running first: the ALTER waits for it, then finds the orphan
    b.batch_execute("BEGIN; DELETE FROM p WHERE id = 1")
        .await
        .unwrap();
    let a = Arc::new(a);
    let alter = {
        let a = Arc::clone(&a);
        tokio::spawn(async move {
            a.batch_execute("ALTER TABLE c ADD CONSTRAINT n FOREIGN KEY (p_id) REFERENCES p (id)")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !alter.is_finished(),
        "the ALTER waits for the parent DELETE"
    );
    b.batch_execute("COMMIT").await.unwrap();
    let e = alter.await.unwrap().unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(detail(&e), "Key (p_id)=(1) is not present in table \"p\".");
    assert_eq!(
        count(&a, "SELECT count(*) FROM pg_constraint WHERE contype = 'f'").await,
        0
    );
}

/// A deferred constraint takes its locks at COMMIT, not at the insert: a
/// child inserted by A (deferred) does not stop B deleting the parent, and
/// then A's COMMIT finds the parent gone (23503, nothing of A kept); a
/// parent deleted by B while A's COMMIT check holds the parent's lock
/// waits for it and then finds A's committed child. Either way no orphan
/// is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_checks_lock_at_commit_and_leave_no_orphan() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(
        "CREATE TABLE dp (id INT PRIMARY KEY);
         CREATE TABLE dc (id INT PRIMARY KEY, p_id INT REFERENCES dp DEFERRABLE INITIALLY DEFERRED);
         INSERT INTO dp VALUES (1), (2)",
    )
    .await
    .unwrap();
    a.batch_execute("BEGIN; INSERT INTO dc VALUES (10, 1)")
        .await
        .unwrap();
    // no lock yet: the DELETE does not wait
    assert_eq!(
        b.execute("DELETE FROM dp WHERE id = 1", &[]).await.unwrap(),
        1
    );
    let e = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(state(&e), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(count(&a, "SELECT count(*) FROM dc").await, 0);

    // the commit's check holds p=2's lock: a DELETE that comes after waits
    // for the commit, then sees the child
    a.batch_execute("BEGIN; INSERT INTO dc VALUES (11, 2); SET CONSTRAINTS ALL IMMEDIATE")
        .await
        .unwrap();
    let waited = blocked_until(
        &b,
        "DELETE FROM dp WHERE id = 2",
        &a,
        "COMMIT",
        "the DELETE waits for the checked child's txn",
    )
    .await;
    assert_eq!(state(&waited.unwrap_err()), SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        count(&a, "SELECT count(*) FROM dc JOIN dp ON dp.id = dc.p_id").await,
        count(&a, "SELECT count(*) FROM dc").await
    );
}
