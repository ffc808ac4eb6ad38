//! Stand-in with the contract's public signatures (docs: /work/golden/live-contract.md);
//! the http helper's module replaces this file at merge.

use std::future::Future;

use crate::controller::Controller;
use crate::{api, journal};

#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub submit_rate_per_s: f64,
    pub submit_burst: u32,
}

pub fn router(_controller: Controller, _options: HttpOptions) -> axum::Router {
    unimplemented!()
}

pub async fn serve(
    _listener: tokio::net::TcpListener,
    _controller: Controller,
    _options: HttpOptions,
    _shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    unimplemented!()
}

pub async fn bootstrap_admin(_db: &journal::Db) -> Result<Option<String>, journal::JournalError> {
    unimplemented!()
}

pub async fn create_token(
    _db: &journal::Db,
    _scope: api::Scope,
    _tenant: Option<&str>,
) -> Result<String, journal::JournalError> {
    unimplemented!()
}

pub const ROUTES: &[(&str, &str, &str)] = &[];
