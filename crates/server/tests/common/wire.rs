//! Helpers of the wire-level tests (`wire_values.rs`,
//! `wire_result_types.rs`): parameters sent as text whatever their type,
//! and running one body against PostgreSQL 15 (when
//! `EDDY_WIRE_VALUES_PG` names one) and then against Eddy.

use bytes::{BufMut, BytesMut};
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls};

use super::Server;

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// A parameter sent in text format, whatever its declared type, as
/// pgjdbc, node-postgres and psycopg 3 (text mode) send them.
#[derive(Debug)]
pub struct Text(pub &'static str);

impl ToSql for Text {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    tokio_postgres::types::to_sql_checked!();
}

/// Runs `body` against PostgreSQL (when `EDDY_WIRE_VALUES_PG` is set) and
/// then against a fresh Eddy server.
pub async fn on_servers<F, Fut>(body: F)
where
    F: Fn(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Ok(conn) = std::env::var("EDDY_WIRE_VALUES_PG") {
        let (client, connection) = tokio_postgres::connect(&conn, NoTls)
            .await
            .expect("connect to PostgreSQL");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        body(client).await;
    }
    let srv = Server::start("trust");
    body(srv.connect().await).await;
}
