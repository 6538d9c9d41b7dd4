//! groupcoord's compiled gRPC front end: tonic's HTTP/2 and gRPC framing on a tokio thread of its own, the
//! coordinator in Python.
//!
//! Theory of operation. `Frontend(listen, ...)` binds; `start(methods)` serves the given RPC paths (each with
//! whether the client and the server stream) on one tokio current-thread runtime. A call is not decoded here:
//! its message bytes, its metadata and the peer go into one queue as an event (a unary call; a stream's
//! opening, each of its messages, its half-close, its cancellation), and the first event of an empty queue
//! writes the eventfd that the Python event loop watches (`fileno()`). Python takes the whole queue with one
//! `drain()`, runs every call through the same request pipeline as the grpcio server, and answers with one
//! `complete()` per batch: per call, the reply bytes or a gRPC status. The tokio thread never takes the GIL;
//! Python never waits for the tokio thread. With TLS (tls.rs) a connection's handshake comes first, in its own
//! task, and every call on it carries what the handshake established (the client certificate's CN); without
//! TLS a connection is served exactly as before.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use tokio::sync::watch;
use tonic::{Code, Status};

mod calls;
mod tls;

use calls::*;
use tls::TlsPeer;
use tokio_rustls::TlsAcceptor;

fn peer_name(addr: SocketAddr) -> Arc<str> {
    match addr {
        SocketAddr::V4(a) => format!("ipv4:{}:{}", a.ip(), a.port()).into(),
        SocketAddr::V6(a) => format!("ipv6:[{}]:{}", a.ip(), a.port()).into(),
    }
}

/// One connection's HTTP/2 until it ends, or until the server stops (then gracefully: calls in flight finish).
async fn serve_connection<I>(
    io: I,
    router: Arc<Router>,
    peer: Arc<str>,
    tls: Option<Arc<TlsPeer>>,
    mut stop: watch::Receiver<Option<f64>>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let max_streams = router.max_streams;
    let service = hyper::service::service_fn(move |request| {
        let router = router.clone();
        let peer = peer.clone();
        let tls = tls.clone();
        async move { Ok::<_, Infallible>(router.handle(peer, tls, request).await) }
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder.max_concurrent_streams(max_streams);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = async { let _ = stop.wait_for(|g| g.is_some()).await; } => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// A TLS connection: its handshake first (bounded), then its HTTP/2 with what the handshake established. A failed
/// handshake (no or an untrusted client certificate, a plaintext client) closes the socket: the client sees
/// UNAVAILABLE, as from grpcio; when TLS itself refused it, Python logs why (`TLS_REFUSED`).
async fn serve_tls_connection(
    acceptor: TlsAcceptor,
    socket: tokio::net::TcpStream,
    router: Arc<Router>,
    peer: Arc<str>,
    stop: watch::Receiver<Option<f64>>,
) {
    let stream = match tokio::time::timeout(tls::HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            if let Some(reason) = tls::refusal(&e) {
                let refused = Event::bare(TLS_REFUSED, 0, 0, Some(Bytes::from(reason)));
                router.shared.push(Event {
                    peer: Some(peer),
                    ..refused
                });
            }
            return;
        }
        Err(_) => return,
    };
    let caller = Arc::new(tls::peer_of(stream.get_ref().1));
    serve_connection(TokioIo::new(stream), router, peer, Some(caller), stop).await
}

async fn serve(
    listener: std::net::TcpListener,
    router: Arc<Router>,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<Option<f64>>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(_) => return,
    };
    let mut connections = tokio::task::JoinSet::new();
    let grace = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, addr)) = accepted else { continue };
                let _ = socket.set_nodelay(true);
                let router = router.clone();
                let stop = shutdown.clone();
                let tls = tls.clone();
                connections.spawn(async move {
                    let peer = peer_name(addr);
                    match tls {
                        None => serve_connection(TokioIo::new(socket), router, peer, None, stop).await,
                        Some(acceptor) => serve_tls_connection(acceptor, socket, router, peer, stop).await,
                    }
                });
            }
            _ = shutdown.changed() => {
                if let Some(grace) = *shutdown.borrow() { break grace; }
            }
        }
    };
    drop(listener);
    let all_done = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(Duration::from_secs_f64(grace.max(0.0)), all_done).await;
    connections.abort_all();
}

/// The compiled front end: bound at construction, serving from `start` until `shutdown`.
#[pyclass(module = "groupcoord_frontend")]
struct Frontend {
    shared: Arc<Shared>,
    listener: Option<std::net::TcpListener>,
    #[pyo3(get)]
    port: u16,
    max_send: usize,
    max_streams: Option<u32>,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Sender<Option<f64>>,
    thread: Option<JoinHandle<()>>,
}

#[pymethods]
impl Frontend {
    /// TLS when `tls_cert_chain` and `tls_key` (PEM) are given; with `tls_client_ca` too, client certificates
    /// are required and verified against it.
    #[new]
    #[pyo3(signature = (listen, max_receive_bytes, max_send_bytes, max_concurrent_calls=0, max_concurrent_streams=0,
                        tls_cert_chain=None, tls_key=None, tls_client_ca=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        listen: &str,
        max_receive_bytes: usize,
        max_send_bytes: usize,
        max_concurrent_calls: usize,
        max_concurrent_streams: u32,
        tls_cert_chain: Option<&[u8]>,
        tls_key: Option<&[u8]>,
        tls_client_ca: Option<&[u8]>,
    ) -> PyResult<Self> {
        let tls = match (tls_cert_chain, tls_key) {
            (Some(chain), Some(key)) => Some(TlsAcceptor::from(
                tls::server_config(chain, key, tls_client_ca).map_err(PyValueError::new_err)?,
            )),
            (None, None) if tls_client_ca.is_none() => None,
            _ => return Err(PyValueError::new_err("TLS needs a certificate chain and its key")),
        };
        let listener = std::net::TcpListener::bind(listen)
            .map_err(|e| PyOSError::new_err(format!("cannot listen on {listen}: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        let port = listener
            .local_addr()
            .map_err(|e| PyOSError::new_err(e.to_string()))?
            .port();
        // SAFETY: plain syscall; the fd is owned by this Frontend and closed on drop.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(PyOSError::new_err("eventfd failed"));
        }
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                events: Vec::new(),
                armed: false,
            }),
            replies: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            efd,
            max_receive: max_receive_bytes,
            stopped: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            max_in_flight: max_concurrent_calls,
        });
        let (shutdown, _) = watch::channel(None);
        let max_streams = if max_concurrent_streams > 0 {
            Some(max_concurrent_streams)
        } else {
            None
        };
        Ok(Frontend {
            shared,
            listener: Some(listener),
            port,
            max_send: max_send_bytes,
            max_streams,
            tls,
            shutdown,
            thread: None,
        })
    }

    /// The fd to watch: readable when events wait for `drain`.
    fn fileno(&self) -> RawFd {
        self.shared.efd
    }

    /// Serve `methods`, a list of (path, client streaming, server streaming); an event's method is its index.
    fn start(&mut self, methods: Vec<(String, bool, bool)>) -> PyResult<()> {
        let listener = self
            .listener
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("already started"))?;
        let mut table = HashMap::new();
        for (i, (path, client_streaming, server_streaming)) in methods.into_iter().enumerate() {
            let kind = match (client_streaming, server_streaming) {
                (false, false) => Kind::Unary,
                (false, true) => Kind::ServerStreaming,
                (true, true) => Kind::Bidirectional,
                (true, false) => {
                    return Err(PyValueError::new_err(format!(
                        "{path}: client-streaming RPCs are not served"
                    )))
                }
            };
            table.insert(path, (i as u32, kind));
        }
        let router = Arc::new(Router {
            shared: self.shared.clone(),
            methods: table,
            max_send: self.max_send,
            max_streams: self.max_streams,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let stop = self.shutdown.subscribe();
        let shared = self.shared.clone();
        let tls = self.tls.clone();
        self.thread = Some(
            std::thread::Builder::new()
                .name("groupcoord-frontend".into())
                .spawn(move || {
                    runtime.block_on(serve(listener, router, tls, stop));
                    drop(runtime);
                    shared.stopped.store(true, Ordering::Release);
                    // Every call still waiting gets UNAVAILABLE; wake Python one last time.
                    shared.replies.lock().unwrap().clear();
                    shared.push(Event::bare(STREAM_CANCEL, 0, 0, None));
                })
                .map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
        );
        Ok(())
    }

    /// Every event since the last drain: (kind, call id, method index, payload, metadata, peer, TLS) tuples;
    /// TLS is None on plaintext, else the call's auth context as grpcio gives it (tls.rs).
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = {
            let mut q = self.shared.queue.lock().unwrap();
            q.armed = false;
            let mut count: u64 = 0;
            // SAFETY: reads 8 bytes into a valid u64 from our own non-blocking eventfd.
            unsafe { libc::read(self.shared.efd, &mut count as *mut u64 as *mut libc::c_void, 8) };
            std::mem::take(&mut q.events)
        };
        let out = PyList::empty(py);
        for e in events {
            let payload: PyObject = match &e.payload {
                Some(b) => PyBytes::new(py, b).into_any().unbind(),
                None => py.None(),
            };
            let metadata: PyObject = match &e.metadata {
                Some(md) => {
                    let items: Vec<Bound<'py, PyTuple>> = md
                        .iter()
                        .map(|(k, v)| match v {
                            MetaValue::Ascii(s) => {
                                PyTuple::new(py, [k.into_pyobject(py)?.into_any(), s.into_pyobject(py)?.into_any()])
                            }
                            MetaValue::Binary(b) => {
                                PyTuple::new(py, [k.into_pyobject(py)?.into_any(), PyBytes::new(py, b).into_any()])
                            }
                        })
                        .collect::<PyResult<_>>()?;
                    PyTuple::new(py, items)?.into_any().unbind()
                }
                None => py.None(),
            };
            let peer: PyObject = match &e.peer {
                Some(p) => p.as_ref().into_pyobject(py)?.into_any().unbind(),
                None => py.None(),
            };
            let tls: PyObject = match &e.tls {
                Some(caller) => tls::auth_context(py, caller)?.into_any().unbind(),
                None => py.None(),
            };
            let item = PyTuple::new(
                py,
                [
                    e.kind.into_pyobject(py)?.into_any().unbind(),
                    e.id.into_pyobject(py)?.into_any().unbind(),
                    e.method.into_pyobject(py)?.into_any().unbind(),
                    payload,
                    metadata,
                    peer,
                    tls,
                ],
            )?;
            out.append(item)?;
        }
        Ok(out)
    }

    /// Answers: (call id, reply bytes or None, status code, status message or None) per item. A unary call
    /// takes its reply (status 0) or its status; a stream takes a message with status -1, and ends with its
    /// status (0: OK) and no bytes.
    fn complete(&self, answers: &Bound<'_, PyList>) -> PyResult<()> {
        let mut replies = self.shared.replies.lock().unwrap();
        for item in answers.iter() {
            let (id, payload, code, message): (u64, Option<Bound<'_, PyBytes>>, i32, Option<String>) =
                item.extract()?;
            let status = || Status::new(Code::from_i32(code), message.clone().unwrap_or_default());
            match (code, payload) {
                (-1, Some(bytes)) => {
                    if let Some(Reply::Stream(tx)) = replies.get(&id) {
                        let _ = tx.send(Ok(Bytes::copy_from_slice(bytes.as_bytes())));
                    }
                }
                (0, Some(bytes)) => match replies.remove(&id) {
                    Some(Reply::Unary(tx)) => {
                        let _ = tx.send(Ok(Bytes::copy_from_slice(bytes.as_bytes())));
                    }
                    Some(Reply::Stream(tx)) => {
                        let _ = tx.send(Ok(Bytes::copy_from_slice(bytes.as_bytes())));
                    }
                    None => {}
                },
                (_, _) => match replies.remove(&id) {
                    Some(Reply::Unary(tx)) => {
                        let _ = tx.send(Err(status()));
                    }
                    Some(Reply::Stream(tx)) => {
                        if code != 0 {
                            let _ = tx.send(Err(status()));
                        }
                    }
                    None => {}
                },
            }
        }
        Ok(())
    }

    /// Stop accepting, let calls in flight finish within `grace_s`, then close every connection. Returns at
    /// once: Python keeps answering until `stopped()`.
    fn shutdown(&self, grace_s: f64) {
        let _ = self.shutdown.send(Some(grace_s));
    }

    fn stopped(&self) -> bool {
        self.thread.is_none() || self.shared.stopped.load(Ordering::Acquire)
    }

    fn join(&mut self, py: Python<'_>) {
        if let Some(thread) = self.thread.take() {
            let _ = self.shutdown.send(Some(0.0));
            py.allow_threads(|| {
                let _ = thread.join();
            });
        }
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        let _ = self.shutdown.send(Some(0.0));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // SAFETY: closes the eventfd this Frontend created; the serving thread is gone.
        unsafe { libc::close(self.shared.efd) };
    }
}

#[pymodule]
fn groupcoord_frontend(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Frontend>()?;
    m.add("PROTO_METHODS", proto::PROTO_METHODS.to_vec())?;
    m.add("UNARY", UNARY)?;
    m.add("STREAM_OPEN", STREAM_OPEN)?;
    m.add("STREAM_MESSAGE", STREAM_MESSAGE)?;
    m.add("STREAM_HALF_CLOSE", STREAM_HALF_CLOSE)?;
    m.add("STREAM_CANCEL", STREAM_CANCEL)?;
    m.add("TLS_REFUSED", TLS_REFUSED)?;
    m.add("EVENT_FIELDS", 7)?; // drain()'s tuples: native_server.py checks it against a build from older sources
    Ok(())
}
