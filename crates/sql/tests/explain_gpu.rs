//! EXPLAIN lists the GPU rule's decisions (`gpu_decisions` row): each
//! operator it offloaded and, for each one kept on the CPU, the reason.
//!
//! A process of its own: it tells the planner a device is present
//! (`force_device_present`), which is global. Only planning is forced;
//! nothing here executes on a device.

#[allow(dead_code)] // rows_i64 is for the other test binaries
mod common;

use common::*;
use eddy_sql::{Output, Session};
use futures::StreamExt;

/// EXPLAIN's rows as (plan_type, plan).
async fn explain(s: &mut Session, sql: &str) -> Vec<(String, String)> {
    let mut outs = s.simple_query(&format!("EXPLAIN {sql}")).await;
    let out = outs.pop().expect("one result").expect("EXPLAIN");
    let Output::Rows { mut stream, .. } = out else {
        panic!("EXPLAIN returned no rows");
    };
    let mut rows = Vec::new();
    while let Some(b) = stream.next().await {
        let b = b.expect("batch");
        let text = |i: usize| {
            b.column(i)
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .expect("text column")
                .clone()
        };
        let (kind, plan) = (text(0), text(1));
        for r in 0..b.num_rows() {
            rows.push((kind.value(r).to_string(), plan.value(r).to_string()));
        }
    }
    rows
}

async fn run(s: &mut Session, sql: &str) {
    for out in s.simple_query(sql).await {
        out.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_what_runs_on_the_gpu_and_why_the_rest_does_not() {
    eddy_gpu::device::force_device_present(Some(true));
    let dir = tempfile::tempdir().expect("dir");
    let db = open_db(dir.path(), 1 << 20);
    let mut s = sessions(&db, 1).await.remove(0);
    run(
        &mut s,
        "CREATE TABLE g (id INT PRIMARY KEY, v INT, name TEXT)",
    )
    .await;
    run(&mut s, "INSERT INTO g VALUES (1, 10, 'a'), (2, 20, 'b')").await;
    run(&mut s, "SET eddy.gpu = on").await;

    let rows = explain(&mut s, "SELECT id, v * 2 FROM g WHERE v > 5").await;
    let gpu: Vec<&String> = rows
        .iter()
        .filter(|(k, _)| k == "gpu_decisions")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(gpu.len(), 1, "one gpu_decisions row: {rows:?}");
    assert!(
        gpu[0].contains("-> GpuScanExec"),
        "the integer filter is offloaded: {}",
        gpu[0]
    );
    let physical = rows
        .iter()
        .find(|(k, _)| k == "physical_plan")
        .map(|(_, p)| p.clone())
        .unwrap_or_default();
    assert!(physical.contains("GpuScanExec"), "{physical}");

    // A text predicate is not supported by the code generator: kept, with
    // the reason and its metrics label.
    let rows = explain(&mut s, "SELECT id FROM g WHERE name LIKE 'a%'").await;
    let gpu = rows
        .iter()
        .find(|(k, _)| k == "gpu_decisions")
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| panic!("no gpu_decisions row: {rows:?}"));
    assert!(
        gpu.contains("kept on the CPU: ") && gpu.contains("unsupported"),
        "{gpu}"
    );

    // A star join with its aggregation, over Eddy tables: one fused
    // operator (a string group key from a dimension included), or two
    // with `eddy.gpu_fuse = off`.
    run(
        &mut s,
        "CREATE TABLE dim (dk INT PRIMARY KEY, yr INT, region TEXT)",
    )
    .await;
    run(
        &mut s,
        "CREATE TABLE fact (id INT PRIMARY KEY, dk INT, amount BIGINT)",
    )
    .await;
    run(
        &mut s,
        "INSERT INTO dim VALUES (1, 1997, 'ASIA'), (2, 1998, 'EUROPE')",
    )
    .await;
    run(
        &mut s,
        "INSERT INTO fact VALUES (1, 1, 10), (2, 2, 20), (3, 1, 30)",
    )
    .await;
    let star = "SELECT yr, region, sum(amount), count(*) FROM fact JOIN dim ON fact.dk = dim.dk \
                WHERE yr > 1990 AND amount > 5 GROUP BY yr, region";
    let rows = explain(&mut s, star).await;
    let text = |rows: &[(String, String)], kind: &str| {
        rows.iter()
            .find(|(k, _)| k == kind)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| panic!("no {kind} row: {rows:?}"))
    };
    let physical = text(&rows, "physical_plan");
    assert!(
        physical.contains("GpuJoinAggExec: levels=1, fact filter=amount@")
            && !physical.contains("GpuPreAggExec"),
        "{physical}\n{}",
        text(&rows, "gpu_decisions")
    );
    assert!(
        text(&rows, "gpu_decisions").contains("AggregateExec -> GpuJoinAggExec"),
        "{rows:?}"
    );
    // The fact side is Eddy's scan itself: its whole pieces may be read
    // from device memory kept between queries (`eddy_gpu::resident`).
    assert!(
        physical.contains("fact columns device-resident where whole"),
        "{physical}"
    );
    run(&mut s, "SET eddy.gpu_fuse = off").await;
    let physical = text(&explain(&mut s, star).await, "physical_plan");
    assert!(
        physical.contains("GpuPreAggExec") && !physical.contains("GpuJoinAggExec"),
        "{physical}"
    );
    run(&mut s, "SET eddy.gpu_fuse = on").await;

    // GPU off: DataFusion's EXPLAIN, unchanged.
    run(&mut s, "SET eddy.gpu = off").await;
    let rows = explain(&mut s, "SELECT id, v * 2 FROM g WHERE v > 5").await;
    assert!(
        rows.iter().all(|(k, _)| k != "gpu_decisions"),
        "no decisions with the GPU off: {rows:?}"
    );
}
