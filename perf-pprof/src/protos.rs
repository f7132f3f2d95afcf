//! pprof's `profile.proto` messages (package `perftools.profiles`), prost-generated (perf-profile's),
//! for [`Report::pprof`](crate::Report::pprof).
//!
//! With either `prost-codec` or `protobuf-codec` the messages are prost's. [`Message`] is prost's
//! trait plus rust-protobuf's `write_to_vec` / `write_to_bytes` (what pprof-rs's
//! `protobuf-codec` example calls), so code written for either codec compiles. One difference
//! from pprof-rs's prost messages: `ValueType`'s `type` field is `r#type` (pprof-rs renamed it
//! `ty`).

pub use perf_profile::proto::perftools::profiles::*;

/// prost's `Message`, with rust-protobuf's encoders as provided methods.
pub trait Message: prost::Message {
    /// Appends the encoded message to `vec` (rust-protobuf's name for prost's `encode`).
    ///
    /// # Errors
    ///
    /// None for a `Vec`; prost's signature.
    fn write_to_vec(&self, vec: &mut Vec<u8>) -> Result<(), prost::EncodeError>
    where
        Self: Sized,
    {
        prost::Message::encode(self, vec)
    }

    /// The encoded message (rust-protobuf's name for prost's `encode_to_vec`).
    ///
    /// # Errors
    ///
    /// None; rust-protobuf's signature.
    fn write_to_bytes(&self) -> Result<Vec<u8>, prost::EncodeError>
    where
        Self: Sized,
    {
        Ok(prost::Message::encode_to_vec(self))
    }
}

impl<T: prost::Message> Message for T {}
