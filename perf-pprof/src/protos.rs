//! pprof's `profile.proto` messages (package `perftools.profiles`), prost-generated (perf-profile's),
//! for [`Report::pprof`](crate::Report::pprof).
//!
//! With either `prost-codec` or `protobuf-codec` the messages are prost's. `Message` is prost's
//! trait with `prost-codec`; with `protobuf-codec` it is a trait of this crate offering prost's
//! methods and rust-protobuf's `write_to_vec` / `write_to_bytes` (what pprof-rs's
//! `protobuf-codec` example calls), so code written for either codec compiles. One difference
//! from pprof-rs's prost messages: `ValueType`'s `type` field is `r#type` (pprof-rs renamed it
//! `ty`).

pub use perf_profile::proto::perftools::profiles::*;

/// prost's `Message`, as pprof-rs's `prost-codec` re-exports it.
#[cfg(not(feature = "protobuf-codec"))]
pub use prost::Message;

/// With `protobuf-codec`: prost's `Message` methods and rust-protobuf's encoders under one trait,
/// so that both of pprof-rs's examples compile with `use pprof::protos::Message`.
#[cfg(feature = "protobuf-codec")]
pub trait Message: prost::Message + Sized {
    /// prost's `encode`: appends the encoded message to `buf`.
    ///
    /// # Errors
    ///
    /// When `buf` has too little room (never for a `Vec`).
    fn encode(&self, buf: &mut impl prost::bytes::BufMut) -> Result<(), prost::EncodeError> {
        prost::Message::encode(self, buf)
    }

    /// prost's `encode_to_vec`.
    fn encode_to_vec(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(self)
    }

    /// prost's `encoded_len`.
    fn encoded_len(&self) -> usize {
        prost::Message::encoded_len(self)
    }

    /// prost's `decode`.
    ///
    /// # Errors
    ///
    /// When `buf` is not an encoded message of this type.
    fn decode(buf: impl prost::bytes::Buf) -> Result<Self, prost::DecodeError>
    where
        Self: Default,
    {
        <Self as prost::Message>::decode(buf)
    }

    /// rust-protobuf's `write_to_vec`: appends the encoded message to `vec`.
    ///
    /// # Errors
    ///
    /// None for a `Vec`; rust-protobuf's signature.
    fn write_to_vec(&self, vec: &mut Vec<u8>) -> Result<(), prost::EncodeError> {
        prost::Message::encode(self, vec)
    }

    /// rust-protobuf's `write_to_bytes`: the encoded message.
    ///
    /// # Errors
    ///
    /// None; rust-protobuf's signature.
    fn write_to_bytes(&self) -> Result<Vec<u8>, prost::EncodeError> {
        Ok(prost::Message::encode_to_vec(self))
    }
}

#[cfg(feature = "protobuf-codec")]
impl<T: prost::Message> Message for T {}
