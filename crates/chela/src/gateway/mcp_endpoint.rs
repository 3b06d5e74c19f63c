//! The MCP endpoint's WebSocket on the gateway's listener (see [`crate::mcp::endpoint`]): the
//! upgrade, checked against the endpoint's own tokens (`?token=` or a bearer), not
//! `gateway.token`, since a tool host holds only the token it was issued. The host joins the
//! daemon's [`crate::mcp::endpoint::Hosts`], which hangs up on it when its token is removed.

use std::sync::Arc;

use hyper::Request;
use hyper::header::{AUTHORIZATION, SEC_WEBSOCKET_KEY};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::{ApiError, Gateway, Resp};
use crate::mcp::endpoint::{Endpoints, MAX_MESSAGE, serve};

/// Checks the token and answers the upgrade; the host is served on its own task.
pub async fn accept<B: Send + 'static>(gw: &Arc<Gateway>, req: Request<B>) -> Result<Resp, ApiError> {
    if req.method() != hyper::Method::GET {
        return Err(ApiError::BadRequest("a WebSocket is opened with GET".to_owned()));
    }
    let query = super::auth::query_param(req.uri().query().unwrap_or(""), "token");
    let bearer = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    let Some(token) = query.or(bearer).filter(|t| !t.is_empty()) else {
        return Err(ApiError::Unauthorized);
    };
    let store = Endpoints::open(gw.daemon.workspace());
    let presented = token.clone();
    let name = crate::tasks::blocking(move || store.load().map(|s| s.check(&presented)))
        .await
        .map_err(|e| ApiError::internal("the endpoint store", e))?
        .map_err(|e| {
            chela_log::error!("MCP endpoint: {e}");
            ApiError::Busy("the endpoint store cannot be read; the owner has been told in the log".into())
        })?;
    let Some(name) = name else { return Err(ApiError::Unauthorized) };
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY) else {
        return Err(ApiError::BadRequest("the upgrade request has no Sec-WebSocket-Key".to_owned()));
    };
    let resp = crate::serve::http::switching_protocols(key)?;
    let (toolbox, shutdown) = (Arc::clone(gw.daemon.toolbox()), gw.daemon.shutdown().clone());
    // Recorded before the answer: a `remove` from now on cuts this host at the next reload.
    let joined = gw.daemon.endpoint_hosts().join(&name, &token);
    // Counted among the gateway's WebSockets for as long as this task serves the socket.
    let slot = crate::serve::admit::ws_slot(&req);
    gw.conns.spawn(async move {
        let _slot = slot;
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE))
                    .max_frame_size(Some(MAX_MESSAGE))
                    .read_buffer_size(4096)
                    .write_buffer_size(0)
                    .max_write_buffer_size(MAX_MESSAGE * 2);
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
                chela_log::info!("MCP endpoint host {name} connected");
                serve(toolbox, name, ws, joined, shutdown).await;
            }
            Err(e) => chela_log::debug!("MCP endpoint: WebSocket upgrade failed: {e}"),
        }
    });
    Ok(resp)
}
