//! GPU prices in dollars per GPU-hour, with where each came from: the data that turns a
//! serving configuration's goodput into a cost per million tokens
//! (crates/perf/data/gpu_prices.toml; a user's own file has the same format).

/// The bundled price table.
pub const GPU_PRICES_TOML: &str = include_str!("../data/gpu_prices.toml");

/// One GPU type's price.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuPrice {
    /// A catalog GPU name (`A100-80G`, `H100-SXM`, ...).
    pub gpu: String,
    pub usd_per_gpu_hour: f64,
    pub source: String,
    pub date: String,
}

/// Reads a price table: `[gpu."NAME"]` tables with `usd_per_gpu_hour` (> 0), `source`
/// and `date`; any other key is an error. Errors name `file`, the table and the field
/// (TOML syntax errors carry their line and column). Sorted by GPU name.
pub fn parse_prices(file: &str, text: &str) -> Result<Vec<GpuPrice>, String> {
    let table: toml::Table =
        text.parse().map_err(|e: toml::de::Error| format!("{file}: {}", e.to_string().trim_end()))?;
    if let Some(key) = table.keys().find(|k| *k != "gpu") {
        return Err(format!("{file}: unknown top-level key `{key}` (expected [gpu.\"NAME\"] tables)"));
    }
    let gpus = match table.get("gpu") {
        Some(toml::Value::Table(gpus)) => gpus,
        Some(_) => return Err(format!("{file}: `gpu` must hold tables ([gpu.\"NAME\"])")),
        None => return Ok(Vec::new()),
    };
    let mut prices = Vec::new();
    for (name, entry) in gpus {
        let at = |field: &str| format!("{file}: [gpu.\"{name}\"] {field}");
        let entry = entry.as_table().ok_or_else(|| format!("{file}: gpu.\"{name}\" must be a table"))?;
        if let Some(key) =
            entry.keys().find(|k| !["usd_per_gpu_hour", "source", "date"].contains(&k.as_str()))
        {
            return Err(format!("{}: unknown field (expected usd_per_gpu_hour, source, date)", at(key)));
        }
        let usd_per_gpu_hour = match entry.get("usd_per_gpu_hour") {
            Some(toml::Value::Float(v)) => *v,
            Some(toml::Value::Integer(v)) => *v as f64,
            Some(other) => {
                return Err(format!("{}: expected a number, got `{other}`", at("usd_per_gpu_hour")))
            }
            None => return Err(format!("{}: missing", at("usd_per_gpu_hour"))),
        };
        if !(usd_per_gpu_hour.is_finite() && usd_per_gpu_hour > 0.0) {
            return Err(format!("{}: {usd_per_gpu_hour} must be a positive number", at("usd_per_gpu_hour")));
        }
        let text_field = |field: &str| match entry.get(field) {
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(_) => Err(format!("{}: expected a non-empty string", at(field))),
            None => Err(format!("{}: missing (say where the price comes from and when)", at(field))),
        };
        prices.push(GpuPrice {
            gpu: name.clone(),
            usd_per_gpu_hour,
            source: text_field("source")?,
            date: text_field("date")?,
        });
    }
    prices.sort_by(|a, b| a.gpu.cmp(&b.gpu));
    Ok(prices)
}

/// The bundled table ([`GPU_PRICES_TOML`]).
pub fn bundled_prices() -> Vec<GpuPrice> {
    parse_prices("crates/perf/data/gpu_prices.toml", GPU_PRICES_TOML).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;

    #[test]
    fn the_bundled_table_reads_and_names_catalog_gpus() {
        let prices = parse_prices("bundled", GPU_PRICES_TOML).expect("valid");
        assert_eq!(prices.len(), 4);
        for price in &prices {
            assert!(find_gpu(&price.gpu).is_some(), "{} is not in the catalog", price.gpu);
            assert!(price.usd_per_gpu_hour > 0.0 && !price.source.is_empty() && !price.date.is_empty());
        }
        // $98.32 per 8-GPU p5.48xlarge hour.
        let h100 = prices.iter().find(|p| p.gpu == "H100-SXM").expect("H100 priced");
        assert_eq!(h100.usd_per_gpu_hour, 12.29);
        assert_eq!(bundled_prices(), prices);
    }

    #[test]
    fn errors_name_the_file_table_and_field() {
        let error = |text: &str| parse_prices("p.toml", text).expect_err(text);
        assert_eq!(
            error("[gpu.\"X\"]\nusd_per_gpu_hour = -1\nsource = \"s\"\ndate = \"d\"\n"),
            "p.toml: [gpu.\"X\"] usd_per_gpu_hour: -1 must be a positive number"
        );
        assert!(error("[gpu.\"X\"]\nusd_per_gpu_hour = 1\ndate = \"d\"\n")
            .starts_with("p.toml: [gpu.\"X\"] source: missing"));
        assert!(
            error("[gpu.\"X\"]\nusd_per_gpu_hour = \"1\"\n").contains("usd_per_gpu_hour: expected a number")
        );
        assert!(error("[gpu.\"X\"]\nprice = 1\n").contains("[gpu.\"X\"] price: unknown field"));
        assert!(error("[prices]\n").contains("unknown top-level key `prices`"));
        assert!(
            error("[gpu.\"X\"\n").starts_with("p.toml: TOML parse error at line 1"),
            "{}",
            error("[gpu.\"X\"\n")
        );
        assert_eq!(parse_prices("p.toml", "").expect("empty"), Vec::new());
    }
}
