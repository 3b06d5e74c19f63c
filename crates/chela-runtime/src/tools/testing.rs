//! Test helpers of the toolbox: tools that block or never finish, a one-route HTTP server, and
//! the field names of a tool's arguments. The workspace fixture is `testing::Fixture`, at the crate's root.

/// Test-only tools, registered at runtime by the tests of the toolbox and the sessions.
pub mod fake {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde::Deserialize;
    use tokio::sync::{Notify, mpsc};

    use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};

    #[derive(Deserialize)]
    pub struct NoArgs {}

    const NO_ARGS: &str = r#"{"type":"object","properties":{}}"#;

    /// Says `started` when called, then waits until `open` is notified.
    pub struct Gate {
        pub started: mpsc::UnboundedSender<()>,
        pub open: Arc<Notify>,
    }

    impl Tool for Gate {
        const NAME: &'static str = "gate";
        const DESCRIPTION: &'static str = "Waits until the test opens it.";
        const SCHEMA: &'static str = NO_ARGS;
        type Args = NoArgs;

        async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
            let _ = self.started.send(());
            self.open.notified().await;
            Ok("opened".into())
        }
    }

    /// Never finishes.
    pub struct Never;

    impl Tool for Never {
        const NAME: &'static str = "never";
        const DESCRIPTION: &'static str = "Never finishes.";
        const SCHEMA: &'static str = NO_ARGS;
        type Args = NoArgs;

        async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
            std::future::pending().await
        }
    }

    /// Blocks its thread until a signal comes from a task on the async runtime. Run on the
    /// runtime's only worker, it would wait for a task that cannot run.
    pub struct WaitsBlocking(pub Mutex<std::sync::mpsc::Receiver<()>>);

    impl Tool for WaitsBlocking {
        const NAME: &'static str = "waits_blocking";
        const DESCRIPTION: &'static str = "Blocks until signalled.";
        const SCHEMA: &'static str = NO_ARGS;
        const BLOCKING: bool = true;
        type Args = NoArgs;

        async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
            let rx = self.0.lock().unwrap();
            // Bounded, so a broken mechanism fails the test instead of hanging it.
            rx.recv_timeout(Duration::from_secs(5))
                .map(|()| "signalled".to_owned())
                .map_err(|_| ToolError::new("no signal: the async task never ran while this tool blocked"))
        }
    }

    /// A group holding `tool`.
    pub fn group<T: Tool>(id: &str, tool: T) -> Group {
        Group::new(id.to_owned(), "test tools").with(tool)
    }
}

/// What a fake server saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

type Reply = (u16, Vec<(&'static str, String)>, String);

/// A one-route HTTP server on 127.0.0.1 for tests of tools that call web APIs. It answers every
/// request with `reply(seen)` and records what it saw. It stops when the test's runtime ends.
pub async fn serve(
    reply: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Seen>>>) {
    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;
    use std::sync::{Arc, Mutex};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let reply = Arc::new(reply);
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (reply, log) = (reply.clone(), log2.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (reply, log) = (reply.clone(), log.clone());
                    async move {
                        let method = req.method().to_string();
                        let uri = req.uri().to_string();
                        let headers = req
                            .headers()
                            .iter()
                            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                            .collect();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let seen = Seen { method, uri, headers, body: String::from_utf8_lossy(&body).into_owned() };
                        let (status, hdrs, text) = reply(&seen);
                        log.lock().unwrap().push(seen);
                        let mut resp = hyper::Response::builder().status(status);
                        for (k, v) in hdrs {
                            resp = resp.header(k, v);
                        }
                        Ok::<_, std::convert::Infallible>(resp.body(Full::new(bytes::Bytes::from(text))).unwrap())
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
            });
        }
    });
    (format!("http://{addr}"), log)
}

/// The field names serde uses for a struct type `T`, or `None` when `T` is not a plain struct.
/// Serde's derived `Deserialize` names its fields when it asks for a struct; this deserializer
/// only listens for that and refuses everything else.
pub fn struct_fields<T: serde::de::DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut probe = FieldProbe(None);
    let _ = T::deserialize(&mut probe);
    probe.0
}

struct FieldProbe(Option<&'static [&'static str]>);

#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<M: std::fmt::Display>(_: M) -> Probed {
        Probed
    }
}

impl<'de> serde::Deserializer<'de> for &mut FieldProbe {
    type Error = Probed;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        self.0 = Some(fields);
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// What a set of tools weighs in a first request, as the real request writer encodes it.
#[derive(Debug)]
pub struct ToolWeight {
    pub count: usize,
    /// Bytes of the `tools` array of an Anthropic request body.
    pub anthropic: usize,
    /// Bytes of the `tools` array of an OpenAI-compatible request body.
    pub openai: usize,
    /// The heaviest tool in the Anthropic form, with its bytes.
    pub heaviest: (String, usize),
}

/// Encodes a first request offering `tools` in both wire formats and weighs its `tools` array.
pub fn tool_weight(tools: &[chela_proto::chat::ToolSpec<'_>]) -> ToolWeight {
    use chela_core::exchange::{Endpoint, Kind};
    let call = chela_core::agent::ModelCall {
        system: "",
        messages: &[],
        tool_choice: Default::default(),
        cache: Default::default(),
        format: None,
    };
    let weigh = |kind: Kind| {
        let ep = Endpoint {
            kind,
            base_url: "http://127.0.0.1:1".into(),
            api_key: String::new(),
            model: "m".into(),
            max_tokens: 1024,
            stream: true,
        };
        let mut body = String::new();
        ep.write_body(&call, tools, &mut body);
        let v: serde_json::Value = serde_json::from_str(&body).expect("the request body is JSON");
        v["tools"].as_array().cloned().unwrap_or_default()
    };
    let len = |v: &serde_json::Value| serde_json::to_string(v).unwrap_or_default().len();
    let (a, o) = (weigh(Kind::Anthropic), weigh(Kind::OpenAi));
    let heaviest = a
        .iter()
        .map(|t| (t["name"].as_str().unwrap_or_default().to_owned(), len(t)))
        .max_by_key(|(_, n)| *n)
        .unwrap_or_default();
    ToolWeight {
        count: a.len(),
        // The array's brackets and commas count, as they are sent.
        anthropic: len(&serde_json::Value::Array(a)),
        openai: len(&serde_json::Value::Array(o)),
        heaviest,
    }
}
