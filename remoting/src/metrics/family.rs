//! Metric families whose series are bounded: a topic or group name from a client becomes a label
//! value, so without a cap a client could grow the exposition (and our memory) without end. Java
//! caps each family at `metricsOtelCardinalityLimit` series (50,000) the same way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use prometheus::core::Collector;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The prometheus families this module bounds.
pub trait Family: Collector + Clone + 'static {
    type Series: Clone;
    fn series(&self, values: &[&str]) -> Option<Self::Series>;
    fn reset(&self);
}

macro_rules! family {
    ($($vec:ty => $series:ty),*) => {$(
        impl Family for $vec {
            type Series = $series;
            fn series(&self, values: &[&str]) -> Option<$series> {
                self.get_metric_with_label_values(values).ok()
            }
            fn reset(&self) {
                <$vec>::reset(self)
            }
        }
    )*};
}
family!(IntCounterVec => IntCounter, IntGaugeVec => IntGauge, HistogramVec => Histogram);

/// A labelled family with at most `limit` series; recording into a new series past the limit
/// is dropped (logged once per family).
pub struct Bounded<V: Family> {
    vec: V,
    /// The series made so far, by their label values joined with NUL.
    series: RwLock<HashMap<String, V::Series>>,
    limit: usize,
    overflowed: AtomicBool,
}

pub type Counters = Bounded<IntCounterVec>;
pub type Gauges = Bounded<IntGaugeVec>;
pub type Histograms = Bounded<HistogramVec>;

impl<V: Family> Bounded<V> {
    fn new(vec: V, registry: &Registry, limit: usize) -> Self {
        // Names and labels are ours and fixed; a failure here is a bug found by the tests.
        if let Err(e) = registry.register(Box::new(vec.clone())) {
            tracing::error!(error = %e, "metric family not registered");
        }
        Bounded { vec, series: RwLock::new(HashMap::new()), limit, overflowed: AtomicBool::new(false) }
    }

    /// The series of `values` (one per label, in the family's label order), made if the family
    /// has room.
    pub fn with(&self, values: &[&str]) -> Option<V::Series> {
        let key = values.join("\0");
        if let Some(metric) = self.series.read().get(&key) {
            return Some(metric.clone());
        }
        let mut series = self.series.write();
        if let Some(metric) = series.get(&key) {
            return Some(metric.clone());
        }
        if series.len() >= self.limit {
            if !self.overflowed.swap(true, Ordering::Relaxed) {
                tracing::warn!(limit = self.limit, "a metric family reached metricsOtelCardinalityLimit series; new series are dropped");
            }
            return None;
        }
        let metric = self.vec.series(values)?;
        series.insert(key, metric.clone());
        Some(metric)
    }

    /// Forgets every series: gauges computed afresh at each scrape start from nothing, so a
    /// group that went away stops being reported (as Java's callbacks stop recording it).
    pub fn clear(&self) {
        let mut series = self.series.write();
        self.vec.reset();
        series.clear();
    }
}

impl Counters {
    pub fn counters(registry: &Registry, name: &str, help: &str, labels: &[&str], limit: usize) -> Self {
        let vec = IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter family");
        Bounded::new(vec, registry, limit)
    }

    pub fn add(&self, values: &[&str], n: u64) {
        if let Some(counter) = self.with(values) {
            counter.inc_by(n);
        }
    }
}

impl Gauges {
    pub fn gauges(registry: &Registry, name: &str, help: &str, labels: &[&str], limit: usize) -> Self {
        let vec = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge family");
        Bounded::new(vec, registry, limit)
    }

    pub fn set(&self, values: &[&str], value: i64) {
        if let Some(gauge) = self.with(values) {
            gauge.set(value);
        }
    }
}

impl Histograms {
    pub fn histograms(registry: &Registry, name: &str, help: &str, labels: &[&str], buckets: &[f64], limit: usize) -> Self {
        let vec = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels).expect("valid histogram family");
        Bounded::new(vec, registry, limit)
    }

    pub fn observe(&self, values: &[&str], value: f64) {
        if let Some(histogram) = self.with(values) {
            histogram.observe(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Encoder;

    fn text(registry: &Registry) -> String {
        let mut out = Vec::new();
        prometheus::TextEncoder::new().encode(&registry.gather(), &mut out).expect("encodes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn a_family_stops_making_series_at_its_limit() {
        let registry = Registry::new();
        let counters = Counters::counters(&registry, "t_total", "t", &["topic"], 2);
        counters.add(&["a"], 1);
        counters.add(&["b"], 2);
        counters.add(&["c"], 3);
        counters.add(&["a"], 1);
        let text = text(&registry);
        assert!(text.contains("t_total{topic=\"a\"} 2"), "{text}");
        assert!(text.contains("t_total{topic=\"b\"} 2"), "{text}");
        assert!(!text.contains("topic=\"c\""), "{text}");
    }

    #[test]
    fn cleared_gauges_report_only_what_is_set_again() {
        let registry = Registry::new();
        let gauges = Gauges::gauges(&registry, "g", "g", &["group"], 10);
        gauges.set(&["old"], 5);
        gauges.clear();
        gauges.set(&["new"], 1);
        let text = text(&registry);
        assert!(text.contains("g{group=\"new\"} 1") && !text.contains("old"), "{text}");
    }
}
