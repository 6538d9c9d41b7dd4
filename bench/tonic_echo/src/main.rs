//! The echo control of bench/heartbeat_cost.py, compiled: tonic (Rust) answering ConsumerGroupHeartbeat, its
//! stream and its batch stream with prebuilt replies, as bench/echo_server.py does with grpcio. What it costs
//! per heartbeat is the floor of a compiled gRPC front end (issue 30 step 4), before any hand-off to Python.
//!
//!     tonic-echo --port 50052 [--threads 1]     (1: tokio's current-thread runtime, one core as grpc.aio)

use std::pin::Pin;

use tokio_stream::{Stream, StreamExt};
use tonic::{transport::Server, Request, Response, Status, Streaming};

pub mod pb {
    tonic::include_proto!("groupcoord.v1");
}

use pb::group_coordinator_server::{GroupCoordinator, GroupCoordinatorServer};
use pb::{
    consumer_group_heartbeat_response::Assignment, ConsumerGroupHeartbeatBatchRequest,
    ConsumerGroupHeartbeatBatchResponse, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    TopicPartitions,
};

fn reply(request: &ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    let mut out = ConsumerGroupHeartbeatResponse { member_epoch: 1, heartbeat_interval_ms: 5000, ..Default::default() };
    if request.member_epoch == 0 {
        out.assignment = Some(Assignment {
            topic_partitions: vec![TopicPartitions {
                topic_id: "0123456789abcdef0123456789abcdef".into(),
                partitions: (0..10).collect(),
                topic_name: "bench".into(),
            }],
        });
    }
    out
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[derive(Default)]
struct Echo;

#[tonic::async_trait]
impl GroupCoordinator for Echo {
    async fn consumer_group_heartbeat(
        &self,
        request: Request<ConsumerGroupHeartbeatRequest>,
    ) -> Result<Response<ConsumerGroupHeartbeatResponse>, Status> {
        Ok(Response::new(reply(request.get_ref())))
    }

    type ConsumerGroupHeartbeatStreamStream = Answers<ConsumerGroupHeartbeatResponse>;

    async fn consumer_group_heartbeat_stream(
        &self,
        request: Request<Streaming<ConsumerGroupHeartbeatRequest>>,
    ) -> Result<Response<Self::ConsumerGroupHeartbeatStreamStream>, Status> {
        let answers = request.into_inner().map(|r| r.map(|heartbeat| reply(&heartbeat)));
        Ok(Response::new(Box::pin(answers)))
    }

    type ConsumerGroupHeartbeatBatchStreamStream = Answers<ConsumerGroupHeartbeatBatchResponse>;

    async fn consumer_group_heartbeat_batch_stream(
        &self,
        request: Request<Streaming<ConsumerGroupHeartbeatBatchRequest>>,
    ) -> Result<Response<Self::ConsumerGroupHeartbeatBatchStreamStream>, Status> {
        let answers = request.into_inner().map(|r| {
            r.map(|batch| ConsumerGroupHeartbeatBatchResponse {
                responses: batch.heartbeats.iter().map(reply).collect(),
            })
        });
        Ok(Response::new(Box::pin(answers)))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: &str| -> String {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or(default.into())
    };
    let port: u16 = value("--port", "50052").parse()?;
    let threads: usize = value("--threads", "1").parse()?;
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()?
    };
    runtime.block_on(async move {
        let addr = format!("127.0.0.1:{port}").parse()?;
        println!("echo (tonic, {threads} thread(s)) serving on {addr}");
        Server::builder()
            .add_service(GroupCoordinatorServer::new(Echo))
            .serve_with_shutdown(addr, async {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
                tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
            })
            .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
