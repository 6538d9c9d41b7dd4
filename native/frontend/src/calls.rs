//! The calls: how tonic's requests become the events Python drains (unary calls, streams' openings, messages,
//! half-closes and cancellations), the raw-bytes codec that decodes nothing, the limits on calls in flight, and
//! the router from an RPC path to its kind.

use bytes::{Buf, BufMut, Bytes};
use hyper::body::Incoming;
use std::collections::HashMap;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::body::BoxBody;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::KeyAndValueRef;
use tonic::server::{Grpc, ServerStreamingService, StreamingService, UnaryService};
use tonic::{Request, Response, Status, Streaming};

use crate::tls::TlsPeer;

pub(crate) mod proto {
    include!(concat!(env!("OUT_DIR"), "/methods.rs"));
}

// Event kinds, as Python sees them (groupcoord/coordinator/runtime/native_server.py).
pub(crate) const UNARY: u8 = 0;
pub(crate) const STREAM_OPEN: u8 = 1; // a bidirectional stream (no payload) or a server stream (its one request)
pub(crate) const STREAM_MESSAGE: u8 = 2;
pub(crate) const STREAM_HALF_CLOSE: u8 = 3;
pub(crate) const STREAM_CANCEL: u8 = 4;
pub(crate) const TLS_REFUSED: u8 = 5; // a TLS handshake refused (no call): its reason as the payload, for the log

/// Headers that are the transport's, not the call's metadata (grpc.aio leaves them out too).
pub(crate) const RESERVED: [&str; 6] = [
    "te",
    "content-type",
    "user-agent",
    "grpc-accept-encoding",
    "grpc-encoding",
    "grpc-timeout",
];

pub(crate) type Metadata = Vec<(String, MetaValue)>;

pub(crate) enum MetaValue {
    Ascii(String),
    Binary(Bytes),
}

pub(crate) struct Event {
    pub(crate) kind: u8,
    pub(crate) id: u64,
    pub(crate) method: u32,
    pub(crate) payload: Option<Bytes>,
    pub(crate) metadata: Option<Metadata>,
    pub(crate) peer: Option<Arc<str>>,
    pub(crate) tls: Option<Arc<TlsPeer>>, // a call's opening over TLS: what its connection's handshake established
}

impl Event {
    /// An event that is not a call's opening: no metadata, peer or TLS (a stream's message or end, the stop).
    pub(crate) fn bare(kind: u8, id: u64, method: u32, payload: Option<Bytes>) -> Event {
        Event {
            kind,
            id,
            method,
            payload,
            metadata: None,
            peer: None,
            tls: None,
        }
    }
}

pub(crate) enum Reply {
    Unary(oneshot::Sender<Result<Bytes, Status>>),
    Stream(mpsc::UnboundedSender<Result<Bytes, Status>>),
}

pub(crate) struct Queue {
    pub(crate) events: Vec<Event>,
    pub(crate) armed: bool, // the eventfd was written since the last drain
}

pub(crate) struct Shared {
    pub(crate) queue: Mutex<Queue>,
    pub(crate) replies: Mutex<HashMap<u64, Reply>>,
    pub(crate) next_id: AtomicU64,
    pub(crate) efd: RawFd,
    pub(crate) max_receive: usize,
    pub(crate) stopped: AtomicBool,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) max_in_flight: usize, // 0: no limit (groupcoord.max.concurrent.requests)
}

/// One call counted against groupcoord.max.concurrent.requests for as long as it lives (a stream for its
/// whole life, as grpc.aio counts it).
pub(crate) struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream's replies, holding its place among the calls in flight until the stream is gone.
pub(crate) struct Counted {
    pub(crate) replies: UnboundedReceiverStream<Result<Bytes, Status>>,
    pub(crate) _slot: Option<InFlight>,
}

impl tokio_stream::Stream for Counted {
    type Item = Result<Bytes, Status>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        Pin::new(&mut self.replies).poll_next(cx)
    }
}

impl Shared {
    pub(crate) fn push(&self, event: Event) {
        let mut q = self.queue.lock().unwrap();
        q.events.push(event);
        if !q.armed {
            q.armed = true;
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid u64 to our own eventfd.
            unsafe { libc::write(self.efd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }

    pub(crate) fn open(&self, reply: Reply) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.replies.lock().unwrap().insert(id, reply);
        id
    }
}

pub(crate) fn metadata_of(map: &tonic::metadata::MetadataMap) -> Option<Metadata> {
    let mut out = Vec::new();
    for entry in map.iter() {
        match entry {
            KeyAndValueRef::Ascii(key, value) => {
                if RESERVED.contains(&key.as_str()) {
                    continue;
                }
                let text = String::from_utf8_lossy(value.as_encoded_bytes()).into_owned();
                out.push((key.as_str().to_owned(), MetaValue::Ascii(text)));
            }
            KeyAndValueRef::Binary(key, value) => {
                if let Ok(bytes) = value.to_bytes() {
                    out.push((key.as_str().to_owned(), MetaValue::Binary(bytes)));
                }
            }
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

// --- the codec: message bytes in and out as they are ---------------------------------------------------------

#[derive(Clone, Copy)]
pub(crate) struct RawCodec {
    pub(crate) max_receive: usize,
}

pub(crate) struct RawEncoder;
pub(crate) struct RawDecoder {
    pub(crate) max_receive: usize,
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder {
            max_receive: self.max_receive,
        }
    }
}

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        let n = src.remaining();
        if n > self.max_receive {
            // gRPC core's answer to a message over grpc.max_receive_message_length (socket.request.max.bytes)
            return Err(Status::resource_exhausted(format!(
                "Received message larger than max ({n} vs. {})",
                self.max_receive
            )));
        }
        Ok(Some(src.copy_to_bytes(n)))
    }
}

// --- one call -------------------------------------------------------------------------------------------------

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub(crate) type Replies = Counted;

pub(crate) struct Call {
    pub(crate) shared: Arc<Shared>,
    pub(crate) method: u32,
    pub(crate) peer: Arc<str>,
    pub(crate) tls: Option<Arc<TlsPeer>>,
    pub(crate) slot: Option<InFlight>,
}

impl Call {
    /// A call's opening (`UNARY` or `STREAM_OPEN`): its metadata, peer and TLS go to Python with it.
    fn opening(&self, kind: u8, id: u64, payload: Option<Bytes>, metadata: &tonic::metadata::MetadataMap) -> Event {
        Event {
            kind,
            id,
            method: self.method,
            payload,
            metadata: metadata_of(metadata),
            peer: Some(self.peer.clone()),
            tls: self.tls.clone(),
        }
    }
}

pub(crate) fn stopping() -> Status {
    Status::unavailable("the coordinator is stopping")
}

impl UnaryService<Bytes> for Call {
    type Response = Bytes;
    type Future = BoxFuture<Result<Response<Bytes>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let (tx, rx) = oneshot::channel();
        let id = self.shared.open(Reply::Unary(tx));
        let (metadata, _, payload) = request.into_parts();
        self.shared.push(self.opening(UNARY, id, Some(payload), &metadata));
        let slot = self.slot.take();
        Box::pin(async move {
            let _slot = slot;
            match rx.await {
                Ok(Ok(bytes)) => Ok(Response::new(bytes)),
                Ok(Err(status)) => Err(status),
                Err(_) => Err(stopping()),
            }
        })
    }
}

impl ServerStreamingService<Bytes> for Call {
    type Response = Bytes;
    type ResponseStream = Replies;
    type Future = BoxFuture<Result<Response<Replies>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.shared.open(Reply::Stream(tx));
        let (metadata, _, payload) = request.into_parts();
        self.shared
            .push(self.opening(STREAM_OPEN, id, Some(payload), &metadata));
        let replies = Counted {
            replies: UnboundedReceiverStream::new(rx),
            _slot: self.slot.take(),
        };
        Box::pin(async move { Ok(Response::new(replies)) })
    }
}

impl StreamingService<Bytes> for Call {
    type Response = Bytes;
    type ResponseStream = Replies;
    type Future = BoxFuture<Result<Response<Replies>, Status>>;

    fn call(&mut self, request: Request<Streaming<Bytes>>) -> Self::Future {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = self.shared.clone();
        let id = shared.open(Reply::Stream(tx));
        shared.push(self.opening(STREAM_OPEN, id, None, request.metadata()));
        let method = self.method;
        let mut inbound = request.into_inner();
        tokio::spawn(async move {
            let last = loop {
                match inbound.message().await {
                    Ok(Some(bytes)) => shared.push(Event::bare(STREAM_MESSAGE, id, method, Some(bytes))),
                    Ok(None) => break STREAM_HALF_CLOSE,
                    Err(_) => break STREAM_CANCEL,
                }
            };
            shared.push(Event::bare(last, id, method, None));
        });
        let replies = Counted {
            replies: UnboundedReceiverStream::new(rx),
            _slot: self.slot.take(),
        };
        Box::pin(async move { Ok(Response::new(replies)) })
    }
}

// --- the server -----------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Unary,
    ServerStreaming,
    Bidirectional,
}

pub(crate) struct Router {
    pub(crate) shared: Arc<Shared>,
    pub(crate) methods: HashMap<String, (u32, Kind)>,
    pub(crate) max_send: usize,
    pub(crate) max_streams: Option<u32>, // per connection (groupcoord.grpc.max.concurrent.streams)
}

impl Router {
    pub(crate) async fn handle(
        self: Arc<Self>,
        peer: Arc<str>,
        tls: Option<Arc<TlsPeer>>,
        request: http::Request<Incoming>,
    ) -> http::Response<BoxBody> {
        let Some(&(method, kind)) = self.methods.get(request.uri().path()) else {
            let path = request.uri().path().to_owned();
            return Status::unimplemented(format!("Method not found: {path}")).into_http();
        };
        let codec = RawCodec {
            max_receive: self.shared.max_receive,
        };
        let mut grpc = Grpc::new(codec)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(self.max_send);
        let shared = &self.shared;
        let slot = if shared.max_in_flight > 0 {
            if shared.in_flight.fetch_add(1, Ordering::Relaxed) >= shared.max_in_flight {
                shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                // grpc.aio's answer beyond maximum_concurrent_rpcs
                return Status::resource_exhausted("Concurrent RPC limit exceeded!").into_http();
            }
            Some(InFlight(shared.clone()))
        } else {
            None
        };
        let call = Call {
            shared: shared.clone(),
            method,
            peer,
            tls,
            slot,
        };
        match kind {
            Kind::Unary => grpc.unary(call, request).await,
            Kind::ServerStreaming => grpc.server_streaming(call, request).await,
            Kind::Bidirectional => grpc.streaming(call, request).await,
        }
    }
}
