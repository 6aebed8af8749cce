//! Parked requests: a request that cannot be answered yet (a long-polling pull today, a pop
//! tomorrow) waits on a queue until a message arrives there, its deadline passes or its
//! connection closes; then its kind's wake action runs it again and answers it.
//!
//! One mechanism for every kind: requests are keyed by [`QueueKey`], and every lot draws from
//! one [`ParkingBudget`], bounded in requests and in the bytes they hold (a pull carries its
//! subscription, which may be large), per connection and in all, so a client can park one request
//! per queue it owns, not unbounded memory, whichever kinds it parks. A request past a bound is
//! refused at once (the caller answers it SYSTEM_BUSY, and the Java client retries 3 s later).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use remoting::server::Channel;

/// The queue a request waits on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueKey {
    pub topic: String,
    pub queue_id: i32,
}

impl QueueKey {
    pub fn new(topic: &str, queue_id: i32) -> Self {
        QueueKey { topic: topic.to_owned(), queue_id }
    }
}

/// What one kind of parked request tells the lot.
pub trait Parked: Send + 'static {
    fn channel(&self) -> &Channel;
    fn deadline(&self) -> Instant;
    /// Whether the queue's new end (and the arriving message's tags code, when known) lets it
    /// be answered.
    fn satisfied_by(&self, max_offset: i64, tags_code: Option<i64>) -> bool;
    /// The bytes it holds, counted against the budget's byte bounds: what it keeps of the
    /// request (header fields, body) and anything it holds besides. By default its own size.
    fn size_bytes(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// Why a request could not be parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotParked {
    ConnectionFull { limit: usize },
    BrokerFull { limit: usize },
    ConnectionBytesFull { limit_bytes: usize },
    BrokerBytesFull { limit_bytes: usize },
}

impl std::fmt::Display for NotParked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotParked::ConnectionFull { limit } => write!(f, "[PCBUSY]this connection already holds {limit} suspended pulls (maxParkedPullsPerConnection)"),
            NotParked::BrokerFull { limit } => write!(f, "[PCBUSY]the broker already holds {limit} suspended pulls (maxParkedPulls)"),
            NotParked::ConnectionBytesFull { limit_bytes } => {
                write!(f, "[PCBUSY]the suspended pulls of this connection already hold {limit_bytes} bytes of requests")
            }
            NotParked::BrokerBytesFull { limit_bytes } => write!(f, "[PCBUSY]the broker's suspended pulls already hold {limit_bytes} bytes of requests"),
        }
    }
}

/// Bytes the parked requests of one connection may hold (ours; Java has no bound): a pull is a
/// few hundred bytes, so 16,384 ordinary pulls fit many times over.
pub const MAX_PARKED_BYTES_PER_CONNECTION: usize = 64 << 20;
/// Bytes all parked requests may hold: 100,000 ordinary pulls fit.
pub const MAX_PARKED_BYTES: usize = 256 << 20;

/// The bounds every lot shares: parked requests per connection (`maxParkedPullsPerConnection`)
/// and in all (`maxParkedPulls`), and the bytes they hold, per connection and in all.
pub struct ParkingBudget {
    max_per_connection: usize,
    max_total: usize,
    max_bytes_per_connection: usize,
    max_bytes_total: usize,
    used: Mutex<Used>,
}

#[derive(Default)]
struct Used {
    /// Requests and bytes by connection.
    by_channel: HashMap<u64, (usize, usize)>,
    total: usize,
    total_bytes: usize,
}

impl ParkingBudget {
    /// Bounded in count as given, in bytes by [`MAX_PARKED_BYTES_PER_CONNECTION`] and [`MAX_PARKED_BYTES`].
    pub fn new(max_per_connection: usize, max_total: usize) -> Arc<Self> {
        Self::with_bytes(max_per_connection, max_total, MAX_PARKED_BYTES_PER_CONNECTION, MAX_PARKED_BYTES)
    }

    pub fn with_bytes(max_per_connection: usize, max_total: usize, max_bytes_per_connection: usize, max_bytes_total: usize) -> Arc<Self> {
        Arc::new(ParkingBudget { max_per_connection, max_total, max_bytes_per_connection, max_bytes_total, used: Mutex::new(Used::default()) })
    }

    fn take(&self, channel_id: u64, bytes: usize) -> Result<(), NotParked> {
        let mut used = self.used.lock();
        if used.total >= self.max_total {
            return Err(NotParked::BrokerFull { limit: self.max_total });
        }
        if used.total_bytes.saturating_add(bytes) > self.max_bytes_total {
            return Err(NotParked::BrokerBytesFull { limit_bytes: self.max_bytes_total });
        }
        let (count, held) = used.by_channel.entry(channel_id).or_default();
        if *count >= self.max_per_connection {
            return Err(NotParked::ConnectionFull { limit: self.max_per_connection });
        }
        if held.saturating_add(bytes) > self.max_bytes_per_connection {
            return Err(NotParked::ConnectionBytesFull { limit_bytes: self.max_bytes_per_connection });
        }
        *count += 1;
        *held += bytes;
        used.total += 1;
        used.total_bytes += bytes;
        Ok(())
    }

    fn give_back(&self, channel_id: u64, bytes: usize) {
        let mut used = self.used.lock();
        used.total = used.total.saturating_sub(1);
        used.total_bytes = used.total_bytes.saturating_sub(bytes);
        if let Some((count, held)) = used.by_channel.get_mut(&channel_id) {
            *count = count.saturating_sub(1);
            *held = held.saturating_sub(bytes);
            if *count == 0 {
                used.by_channel.remove(&channel_id);
            }
        }
    }

    /// Parked requests of every kind.
    pub fn total(&self) -> usize {
        self.used.lock().total
    }

    /// The bytes parked requests of every kind hold.
    pub fn total_bytes(&self) -> usize {
        self.used.lock().total_bytes
    }
}

/// Runs a woken request again and answers it.
pub type Wake<P> = Box<dyn Fn(P) + Send + Sync>;

/// The parked requests of one kind, by queue.
pub struct ParkingLot<P: Parked> {
    /// Each request with the bytes it was counted for.
    by_queue: Mutex<HashMap<QueueKey, Vec<(P, usize)>>>,
    budget: Arc<ParkingBudget>,
    wake: Wake<P>,
    /// Arrivals told so far (not the periodic check's looks): a request that looked, found
    /// nothing and then parks compares it with what it read before looking, so an arrival between
    /// its look and its parking (which found nothing parked to wake) is not lost.
    arrivals: AtomicU64,
}

impl<P: Parked> ParkingLot<P> {
    pub fn new(wake: Wake<P>, budget: Arc<ParkingBudget>) -> Self {
        ParkingLot { by_queue: Mutex::new(HashMap::new()), budget, wake, arrivals: AtomicU64::new(0) }
    }

    /// Arrivals told so far: read before looking for what a request wants, and given to
    /// [`ParkingLot::park_since`] if it then parks.
    pub fn arrivals(&self) -> u64 {
        self.arrivals.load(Ordering::SeqCst)
    }

    /// Counts an arrival that wakes nobody (nothing is parked): a request looking right now still
    /// learns of it when it parks.
    pub fn note_arrival(&self) {
        self.arrivals.fetch_add(1, Ordering::SeqCst);
    }

    /// As [`ParkingLot::park`], for a request that looked after `seen` arrivals: if any came
    /// since, what it looked at may have changed after its look, so it is woken at once (runs
    /// again and looks).
    pub fn park_since(&self, key: QueueKey, request: P, seen: u64) -> Result<(), Box<(NotParked, P)>> {
        self.park(key.clone(), request)?;
        if self.arrivals() != seen {
            self.notify_arriving(&key, i64::MAX, Some(0), Instant::now());
        }
        Ok(())
    }

    /// Parks a request, unless the budget is spent; then it comes back with the reason.
    pub fn park(&self, key: QueueKey, request: P) -> Result<(), Box<(NotParked, P)>> {
        let bytes = request.size_bytes();
        if let Err(reason) = self.budget.take(request.channel().id(), bytes) {
            return Err(Box::new((reason, request)));
        }
        self.by_queue.lock().entry(key).or_default().push((request, bytes));
        Ok(())
    }

    /// A message reached a queue (or the check looked at it): wake the requests it satisfies,
    /// and drop those whose time is up or whose connection closed (a closed one is not run).
    pub fn notify_arriving(&self, key: &QueueKey, max_offset: i64, tags_code: Option<i64>, now: Instant) {
        if tags_code.is_some() {
            // Counted before looking for whom to wake (see `park_since`).
            self.arrivals.fetch_add(1, Ordering::SeqCst);
        }
        self.wake_where(key, now, |p| p.satisfied_by(max_offset, tags_code));
    }

    /// Messages reached a queue (a dispatch pass's, in queue order: the queue's next offset and
    /// tags code of each): wakes, under one lock, the requests any of them satisfies, as
    /// [`ParkingLot::notify_arriving`] would for each in turn.
    pub fn notify_arrivals(&self, key: &QueueKey, arrivals: &[store::store::Arrival], now: Instant) {
        if arrivals.is_empty() {
            return;
        }
        self.arrivals.fetch_add(1, Ordering::SeqCst);
        self.wake_where(key, now, |p| arrivals.iter().any(|a| p.satisfied_by(a.max_offset, Some(a.tags_code))));
    }

    /// Wakes the requests on `key` that `satisfied` accepts, and drops those whose time is up or
    /// whose connection closed (a closed one is not run).
    fn wake_where(&self, key: &QueueKey, now: Instant, satisfied: impl Fn(&P) -> bool) {
        let woken: Vec<(P, usize)> = {
            let mut by_queue = self.by_queue.lock();
            let Some(parked) = by_queue.get_mut(key) else { return };
            let (wake, keep): (Vec<_>, Vec<_>) = parked.drain(..).partition(|(p, _)| satisfied(p) || now >= p.deadline() || p.channel().is_closed());
            *parked = keep;
            wake
        };
        for (request, bytes) in woken {
            self.budget.give_back(request.channel().id(), bytes);
            if !request.channel().is_closed() {
                (self.wake)(request);
            }
        }
    }

    /// The periodic check: wakes requests whose queue has grown (per `max_offset_of`) or whose
    /// time is up, and forgets empty queues.
    pub fn check(&self, now: Instant, max_offset_of: impl Fn(&str, i32) -> i64) {
        let keys: Vec<QueueKey> = self.by_queue.lock().keys().cloned().collect();
        for key in keys {
            self.notify_arriving(&key, max_offset_of(&key.topic, key.queue_id), None, now);
        }
        self.by_queue.lock().retain(|_, parked| !parked.is_empty());
    }

    /// The budget this lot draws on (another kind of request shares it).
    pub fn budget(&self) -> Arc<ParkingBudget> {
        self.budget.clone()
    }

    /// How many requests parked on `key` pass `f`.
    pub fn count_on(&self, key: &QueueKey, f: impl Fn(&P) -> bool) -> usize {
        self.by_queue.lock().get(key).map_or(0, |parked| parked.iter().filter(|(p, _)| f(p)).count())
    }

    /// How many requests of this kind are parked.
    pub fn held_count(&self) -> usize {
        self.by_queue.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A channel to a throwaway listener: parked requests need a live connection.
    pub(crate) async fn channel() -> (Channel, tokio::net::TcpListener) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = remoting::client::RemotingClient::new(Default::default());
        let channel = client.channel(&listener.local_addr().unwrap().to_string()).await.unwrap();
        (channel, listener)
    }

    /// A request of a kind other than a pull, waiting for offset `from`.
    struct Waiting {
        channel: Channel,
        from: i64,
        deadline: Instant,
    }

    impl Parked for Waiting {
        fn channel(&self) -> &Channel {
            &self.channel
        }
        fn deadline(&self) -> Instant {
            self.deadline
        }
        fn satisfied_by(&self, max_offset: i64, _tags_code: Option<i64>) -> bool {
            max_offset > self.from
        }
    }

    fn counting(woken: &Arc<AtomicUsize>) -> Wake<Waiting> {
        let w = woken.clone();
        Box::new(move |_| {
            w.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[tokio::test]
    async fn two_kinds_of_parked_requests_share_one_budget() {
        let (a, _la) = channel().await;
        let budget = ParkingBudget::new(2, 10);
        let (first, second) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let pulls = ParkingLot::new(counting(&first), budget.clone());
        let pops = ParkingLot::new(counting(&second), budget.clone());
        let later = Instant::now() + Duration::from_secs(60);
        let waiting = |from| Waiting { channel: a.clone(), from, deadline: later };
        assert!(pulls.park(QueueKey::new("T", 0), waiting(5)).is_ok());
        assert!(pops.park(QueueKey::new("T", 0), waiting(5)).is_ok());
        assert_eq!(pops.park(QueueKey::new("T", 1), waiting(5)).map_err(|e| e.0), Err(NotParked::ConnectionFull { limit: 2 }));
        // An arrival wakes each lot's own requests only, with its own action.
        pulls.notify_arriving(&QueueKey::new("T", 0), 6, None, Instant::now());
        assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst), budget.total()), (1, 0, 1));
        assert!(pops.park(QueueKey::new("T", 1), waiting(5)).is_ok(), "a woken request frees its place for any kind");
        pops.check(later, |_, _| 0);
        assert_eq!((second.load(Ordering::SeqCst), pops.held_count(), budget.total()), (2, 0, 0), "the deadline wakes the rest");
    }

    /// A request waiting past offset `from` for a message of tags code `tag`.
    struct Tagged {
        channel: Channel,
        from: i64,
        tag: i64,
    }

    impl Parked for Tagged {
        fn channel(&self) -> &Channel {
            &self.channel
        }
        fn deadline(&self) -> Instant {
            Instant::now() + Duration::from_secs(60)
        }
        fn satisfied_by(&self, max_offset: i64, tags_code: Option<i64>) -> bool {
            max_offset > self.from && tags_code.is_none_or(|t| t == self.tag)
        }
    }

    #[tokio::test]
    async fn a_pass_of_arrivals_wakes_whom_any_of_them_satisfies_and_nobody_else() {
        let (a, _la) = channel().await;
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        let wake = Box::new(move |_: Tagged| {
            w.fetch_add(1, Ordering::SeqCst);
        });
        let lot = ParkingLot::new(wake, ParkingBudget::new(8, 8));
        let key = QueueKey::new("T", 0);
        let arrival = |max_offset, tags_code| store::store::Arrival { max_offset, tags_code };
        assert!(lot.park(key.clone(), Tagged { channel: a.clone(), from: 5, tag: 7 }).is_ok());
        assert!(lot.park(key.clone(), Tagged { channel: a.clone(), from: 6, tag: 3 }).is_ok());
        // Offset 6 has tag 3 (not past the second's offset), offset 7 tag 9: nobody's message.
        lot.notify_arrivals(&key, &[arrival(6, 3), arrival(7, 9)], Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (0, 2));
        // Then tag 7 at offset 8 wakes the first only, tag 3 at 9 the second.
        lot.notify_arrivals(&key, &[arrival(8, 7)], Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (1, 1));
        lot.notify_arrivals(&key, &[arrival(9, 1), arrival(10, 3)], Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (2, 0));
    }

    #[tokio::test]
    async fn an_arrival_between_a_look_and_the_parking_wakes_the_request_at_once() {
        let (a, _la) = channel().await;
        let woken = Arc::new(AtomicUsize::new(0));
        let lot = ParkingLot::new(counting(&woken), ParkingBudget::new(10, 10));
        let later = Instant::now() + Duration::from_secs(60);
        let waiting = || Waiting { channel: a.clone(), from: 5, deadline: later };

        let seen = lot.arrivals();
        assert!(lot.park_since(QueueKey::new("T", 0), waiting(), seen).is_ok());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (0, 1), "nothing came since the look: it waits");

        // Another request looks; a message arrives (waking the first) and one with nobody parked
        // is noted; then it parks, and is woken at once.
        let seen = lot.arrivals();
        lot.notify_arriving(&QueueKey::new("T", 0), 6, Some(0), Instant::now());
        lot.note_arrival();
        assert!(lot.park_since(QueueKey::new("U", 1), waiting(), seen).is_ok());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (2, 0));

        // The periodic check is no arrival.
        let seen = lot.arrivals();
        lot.check(Instant::now(), |_, _| 0);
        assert!(lot.park_since(QueueKey::new("T", 0), waiting(), seen).is_ok());
        assert_eq!((woken.load(Ordering::SeqCst), lot.held_count()), (2, 1));
    }

    /// A request that says it holds `bytes`.
    struct Sized(Waiting, usize);

    impl Parked for Sized {
        fn channel(&self) -> &Channel {
            &self.0.channel
        }
        fn deadline(&self) -> Instant {
            self.0.deadline
        }
        fn satisfied_by(&self, max_offset: i64, tags_code: Option<i64>) -> bool {
            self.0.satisfied_by(max_offset, tags_code)
        }
        fn size_bytes(&self) -> usize {
            self.1
        }
    }

    #[tokio::test]
    async fn parked_bytes_are_bounded_per_connection_and_in_all_and_given_back_when_woken() {
        let (a, _la) = channel().await;
        let (b, _lb) = channel().await;
        let budget = ParkingBudget::with_bytes(100, 100, 1000, 1500);
        let lot = ParkingLot::new(Box::new(|_: Sized| {}), budget.clone());
        let later = Instant::now() + Duration::from_secs(60);
        let sized = |c: &Channel, bytes| Sized(Waiting { channel: c.clone(), from: 5, deadline: later }, bytes);
        assert!(lot.park(QueueKey::new("T", 0), sized(&a, 600)).is_ok());
        assert_eq!(lot.park(QueueKey::new("T", 1), sized(&a, 500)).map_err(|e| e.0), Err(NotParked::ConnectionBytesFull { limit_bytes: 1000 }));
        assert!(lot.park(QueueKey::new("T", 1), sized(&a, 400)).is_ok());
        assert_eq!(lot.park(QueueKey::new("T", 0), sized(&b, 600)).map_err(|e| e.0), Err(NotParked::BrokerBytesFull { limit_bytes: 1500 }));
        assert!(lot.park(QueueKey::new("T", 0), sized(&b, 500)).is_ok());
        assert_eq!((budget.total(), budget.total_bytes()), (3, 1500));
        lot.notify_arriving(&QueueKey::new("T", 0), 6, None, Instant::now());
        assert_eq!((budget.total(), budget.total_bytes()), (1, 400), "woken requests give their bytes back");
        assert!(lot.park(QueueKey::new("T", 2), sized(&a, 600)).is_ok());
    }

    #[tokio::test]
    async fn a_request_whose_connection_closed_is_dropped_not_run() {
        let (a, listener) = channel().await;
        let budget = ParkingBudget::new(2, 10);
        let woken = Arc::new(AtomicUsize::new(0));
        let lot = ParkingLot::new(counting(&woken), budget.clone());
        assert!(lot.park(QueueKey::new("T", 0), Waiting { channel: a.clone(), from: 5, deadline: Instant::now() + Duration::from_secs(60) }).is_ok());
        drop(listener);
        a.close();
        // The connection's tasks see the close asynchronously.
        for _ in 0..200 {
            if a.is_closed() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(a.is_closed());
        lot.notify_arriving(&QueueKey::new("T", 0), 9, None, Instant::now());
        assert_eq!((woken.load(Ordering::SeqCst), budget.total()), (0, 0));
    }
}
