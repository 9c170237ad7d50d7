//! `ArrowBatch`: an Arrow `RecordBatch` as a record of the stream engine.
//!
//! SQL jobs move columnar batches, not rows: one stream record is one
//! batch. The engine asks records to be serde-serialisable (for network
//! edges and snapshots); a batch serialises as Arrow IPC stream bytes.

use arrow::array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Result, StreamSqlError};

/// One Arrow batch as a stream record.
#[derive(Clone, Debug)]
pub struct ArrowBatch(pub RecordBatch);

/// Arrow IPC stream bytes of `batch`.
pub fn to_ipc(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut w = StreamWriter::try_new(&mut buf, &batch.schema())?;
        w.write(batch)?;
        w.finish()?;
    }
    Ok(buf)
}

/// The one batch of Arrow IPC stream bytes written by [`to_ipc`].
pub fn from_ipc(bytes: &[u8]) -> Result<RecordBatch> {
    let mut r = StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    match r.next() {
        Some(b) => Ok(b?),
        None => Err(StreamSqlError::State("IPC stream holds no batch".into())),
    }
}

impl Serialize for ArrowBatch {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let bytes = to_ipc(&self.0).map_err(S::Error::custom)?;
        s.serialize_bytes(&bytes)
    }
}

impl<'de> Deserialize<'de> for ArrowBatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let bytes: Vec<u8> = Deserialize::deserialize(d)?;
        from_ipc(&bytes).map(ArrowBatch).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn a_batch_survives_serialisation() {
        let b = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int64Array::from(vec![1, 2, 3])) as arrow::array::ArrayRef,
            ),
            ("b", Arc::new(StringArray::from(vec!["x", "y", "z"])) as _),
        ])
        .expect("batch");
        let json = serde_json::to_vec(&ArrowBatch(b.clone())).expect("serialise");
        let back: ArrowBatch = serde_json::from_slice(&json).expect("deserialise");
        assert_eq!(back.0, b);
    }
}
