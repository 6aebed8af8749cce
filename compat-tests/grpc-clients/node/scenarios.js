'use strict';
// RocketMQ 5 scenarios run with the official Node.js client (rocketmq-client-nodejs, pinned in
// package.json and package-lock.json) against a gRPC endpoint: normal, invisible, fifo, delay and
// transaction, the same as ../python/scenarios.py.
//
// Usage: node scenarios.js ENDPOINT PREFIX [STEP,...]
//   Topics PREFIX + Normal/Invisible/Fifo/Delay/Tx and groups prefix-normal/... must exist (the FIFO
//   group orderly): rocketmq.compat.proxy.GrpcClientsTest creates them. The steps run at once. Each
//   prints one line: RESULT <step> OK <facts> or RESULT <step> FAIL <reason>; the exit code is 0 only
//   when every step passed.

const { randomBytes } = require('node:crypto');
const { format } = require('node:util');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [ endpoint, prefix, onlyArg ] = process.argv.slice(2);
const runId = String(Date.now() % 1000000);
const AWAIT_MS = 3000;
const TEXT = 'ünïcødé ✓ 消息 = a&b';
const group = name => `${prefix.toLowerCase()}-${name}`;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

function describe(m) {
  return `${m.body.subarray(0, 40).toString()} (id ${m.messageId}, tag ${m.tag}, keys ${JSON.stringify(m.keys)}, group ${m.messageGroup}, ` +
    `attempt ${m.deliveryAttempt}, properties ${JSON.stringify(Object.fromEntries(m.properties))})`;
}

// Starts a client, runs fn with it and shuts it down, also when fn throws.
async function using(client, fn) {
  await client.startup();
  try {
    return await fn(client);
  } finally {
    await client.shutdown().catch(e => console.error(`shutdown: ${e}`));
  }
}

// The clients' warnings and errors go to stderr. The default logger is not used: every client opens its own
// on the same file, and the first client's shutdown closes that file under the others (egg-logger's
// "log stream had been closed").
const logger = {
  info() {},
  debug() {},
  warn: (...args) => console.error(`client WARN ${format(...args)}`),
  error: (...args) => console.error(`client ERROR ${format(...args)}`),
};
const producer = (topic, checker) => new Producer({ endpoints: endpoint, namespace: '', topics: [ topic ], checker, logger });
const consumer = (topic, name, tag = '*') => new SimpleConsumer({
  endpoints: endpoint, namespace: '', consumerGroup: group(name), awaitDuration: AWAIT_MS, logger,
  subscriptions: new Map([[ topic, tag ]]),
});

async function receive(c, invisibleMs, count = 16) {
  return (await c.receive(count, invisibleMs)) ?? [];
}

// One more receive of AWAIT_MS must bring nothing.
async function expectNothing(c, what) {
  const left = await receive(c, 10000);
  check(left.length === 0, `${what}: received ${left.map(describe)}`);
}

async function normal(facts) {
  const topic = `${prefix}Normal`;
  const sent = new Map();
  await using(producer(topic), async p => {
    for (let i = 0; i < 10; i++) {
      const name = `js-${runId}-normal-${i}`;
      // the first one with 256 KiB of binary after its name (the client sends it uncompressed)
      const body = i === 0 ? Buffer.concat([ Buffer.from(name), Buffer.from([ 0 ]), randomBytes(256 * 1024) ]) : Buffer.from(name);
      const receipt = await p.send({
        topic, body, tag: 'TagA', keys: [ `key-${i}`, 'common' ],
        properties: new Map([[ 'index', String(i) ], [ 'lang', 'node' ], [ 'text', TEXT ]]),
      });
      sent.set(name, { i, id: receipt.messageId, body });
    }
    for (let i = 0; i < 2; i++) { // filtered out by the consumer's tag
      await p.send({ topic, body: Buffer.from(`js-${runId}-other-${i}`), tag: 'TagB' });
    }
  });
  const got = new Set();
  await using(consumer(topic, 'normal', 'TagA'), async c => {
    const deadline = Date.now() + 30000;
    while (got.size < sent.size && Date.now() < deadline) {
      for (const m of await receive(c, 15000)) {
        const zero = m.body.indexOf(0);
        const name = m.body.subarray(0, zero < 0 ? m.body.length : zero).toString();
        const s = sent.get(name);
        check(s, `unexpected ${describe(m)}`);
        check(!got.has(name), `twice: ${describe(m)}`);
        check(m.body.equals(s.body), `${describe(m)}: body of ${m.body.length} bytes, sent ${s.body.length}`);
        check(m.messageId === s.id, `${describe(m)}: message id, sent as ${s.id}`);
        check(m.topic === topic, `${describe(m)}: topic`);
        check(m.tag === 'TagA', `${describe(m)}: tag`);
        check(JSON.stringify([ ...m.keys ].sort()) === JSON.stringify([ 'common', `key-${s.i}` ]), `${describe(m)}: keys`);
        check(JSON.stringify([ ...m.properties ].sort()) === JSON.stringify([[ 'index', String(s.i) ], [ 'lang', 'node' ], [ 'text', TEXT ]]),
          `${describe(m)}: properties`);
        check(m.deliveryAttempt === 1, `${describe(m)}: delivery attempt`);
        check(m.bornTimestamp && m.bornTimestamp.getTime() <= Date.now(), `${describe(m)}: born timestamp`);
        check(!m.corrupted, `${describe(m)}: body digest`);
        await c.ack(m);
        got.add(name);
      }
    }
    check(got.size === sent.size, `received ${got.size} of ${sent.size} within 30 s`);
    await expectNothing(c, 'after the acks (TagB filtered out)');
  });
  facts.sentAcked = got.size;
}

// Both received with a 3 s invisible time; A's is changed to 8 s. B comes back after 3 s, A not before
// 8 s from the change, each with its delivery attempt at 2.
async function invisible(facts) {
  const topic = `${prefix}Invisible`;
  const bodies = [ `js-${runId}-inv-a`, `js-${runId}-inv-b` ];
  await using(producer(topic), async p => {
    for (const body of bodies) await p.send({ topic, body: Buffer.from(body) });
  });
  await using(consumer(topic, 'invisible'), async c => {
    const first = new Map();
    let deadline = Date.now() + 30000;
    while (first.size < 2 && Date.now() < deadline) {
      for (const m of await receive(c, 3000)) {
        const body = m.body.toString();
        check(bodies.includes(body) && !first.has(body), `unexpected ${describe(m)}`);
        first.set(body, { at: Date.now(), m });
      }
    }
    check(first.size === 2, `received ${first.size} of 2 within 30 s`);
    const a = first.get(bodies[0]).m;
    const oldHandle = a.receiptHandle;
    await c.changeInvisibleDuration(a, 8000);
    const changedAt = Date.now();
    check(a.receiptHandle && a.receiptHandle !== oldHandle, 'changeInvisibleDuration gave no new handle');
    const back = new Map();
    deadline = Date.now() + 40000;
    while (back.size < 2 && Date.now() < deadline) {
      for (const m of await receive(c, 20000)) {
        const body = m.body.toString();
        check(bodies.includes(body) && !back.has(body), `unexpected ${describe(m)}`);
        const since = Date.now() - (body === bodies[0] ? changedAt : first.get(body).at);
        const wait = body === bodies[0] ? 8000 : 3000;
        check(since >= wait - 200, `${describe(m)} back after ${since} ms, before its ${wait} ms`);
        check(m.deliveryAttempt === 2, `${describe(m)}: delivery attempt`);
        await c.ack(m);
        back.set(body, since);
      }
    }
    check(back.size === 2, `came back ${back.size} of 2 within 40 s`);
    await expectNothing(c, 'after the acks');
    facts.backAfterMs = bodies.map(b => back.get(b));
  });
}

async function fifo(facts) {
  const topic = `${prefix}Fifo`;
  const groups = 3, per = 4;
  await using(producer(topic), async p => {
    for (let s = 0; s < per; s++) {
      for (let g = 0; g < groups; g++) {
        await p.send({ topic, body: Buffer.from(`js-${runId}-g${g}-${s}`), messageGroup: `js-group-${g}`, tag: 'Fifo' });
      }
    }
  });
  const next = new Array(groups).fill(0);
  const total = () => next.reduce((a, b) => a + b, 0);
  await using(consumer(topic, 'fifo'), async c => {
    const deadline = Date.now() + 40000;
    while (total() < groups * per && Date.now() < deadline) {
      for (const m of await receive(c, 10000)) {
        const g = m.messageGroup ? Number(m.messageGroup.split('-').pop()) : -1;
        check(g >= 0 && g < groups, `${describe(m)}: message group`);
        check(m.body.toString() === `js-${runId}-g${g}-${next[g]}`, `${describe(m)}: expected #${next[g]} of its group`);
        check(m.tag === 'Fifo', `${describe(m)}: tag`);
        await c.ack(m);
        next[g]++;
      }
    }
    check(total() === groups * per, `received ${next} of ${per} per group within 40 s`);
    await expectNothing(c, 'after the acks');
  });
  facts.inOrder = total();
}

async function delay(facts) {
  const topic = `${prefix}Delay`;
  const at = new Map();
  await using(producer(topic), async p => {
    for (let i = 0; i < 3; i++) {
      const body = `js-${runId}-delay-${i}`;
      const when = new Date(Date.now() + 3000 + 1000 * i);
      await p.send({ topic, body: Buffer.from(body), deliveryTimestamp: when });
      at.set(body, when.getTime());
    }
  });
  const late = new Map();
  await using(consumer(topic, 'delay'), async c => {
    const deadline = Date.now() + 40000;
    while (late.size < at.size && Date.now() < deadline) {
      for (const m of await receive(c, 15000)) {
        const arrived = Date.now();
        const body = m.body.toString();
        check(at.has(body) && !late.has(body), `unexpected ${describe(m)}`);
        check(arrived >= at.get(body), `${describe(m)} arrived ${at.get(body) - arrived} ms early`);
        check(m.deliveryTimestamp && m.deliveryTimestamp.getTime() === at.get(body),
          `${describe(m)}: delivery timestamp ${m.deliveryTimestamp && m.deliveryTimestamp.getTime()}, sent ${at.get(body)}`);
        await c.ack(m);
        late.set(body, arrived - at.get(body));
      }
    }
    check(late.size === at.size, `received ${late.size} of ${at.size} within 40 s`);
  });
  facts.lateMs = [ ...late.values() ].sort((a, b) => a - b);
}

// Three half messages: one rolled back, one committed, one left open that the server's check (over the
// telemetry stream) has the producer's checker commit. Only the committed and the checked one arrive.
async function transaction(facts) {
  const topic = `${prefix}Tx`;
  const bodies = new Map();
  const asked = [];
  // The server's check: commit the one meant to be checked, roll back any other (the committed and rolled
  // back ones should not be asked about).
  const checker = {
    async check(m) {
      asked.push(bodies.get(m.body.toString()) ?? m.body.toString());
      return m.body.toString().includes('-tx-check') ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  const got = new Map();
  await using(producer(topic, checker), async p => {
    for (const what of [ 'rollback', 'commit', 'check' ]) {
      const tx = p.beginTransaction();
      const body = `js-${runId}-tx-${what}`;
      bodies.set(body, what);
      const receipt = await p.send({
        topic, body: Buffer.from(body), tag: 'Tx', keys: [ `tx-${what}` ], properties: new Map([[ 'outcome', what ]]),
      }, tx);
      check(receipt.transactionId, `${what}: send receipt has no transaction id`);
      if (what === 'commit') await tx.commit();
      if (what === 'rollback') await tx.rollback();
    }
    const sentAt = Date.now();
    await using(consumer(topic, 'tx'), async c => {
      const deadline = Date.now() + 40000;
      while (got.size < 2 && Date.now() < deadline) {
        for (const m of await receive(c, 15000)) {
          const body = m.body.toString();
          const what = bodies.get(body);
          check((what === 'commit' || what === 'check') && !got.has(body), `unexpected ${describe(m)}`);
          check(m.tag === 'Tx' && JSON.stringify(m.keys) === `["tx-${what}"]` && m.properties.get('outcome') === what,
            `${describe(m)}: tag, keys or properties`);
          await c.ack(m);
          got.set(what, Date.now() - sentAt);
        }
      }
      check(got.size === 2, `received ${[ ...got.keys() ]} of commit and check within 40 s`);
      await expectNothing(c, 'after the committed and the checked one (the rolled back one)');
    });
  });
  check(asked.length > 0 && asked.every(w => w === 'check'), `the checker was asked about ${asked}, want the open one only`);
  facts.arrivedAfterMs = Object.fromEntries(got);
}

const STEPS = { normal, invisible, fifo, delay, transaction };

async function run(name) {
  const facts = {};
  const start = Date.now();
  try {
    await STEPS[name](facts);
    console.log(`RESULT ${name} OK ${JSON.stringify(facts)} in ${(Date.now() - start) / 1000} s`);
    return true;
  } catch (e) {
    console.error(e);
    console.log(`RESULT ${name} FAIL ${String(e && e.message || e).replace(/\n/g, ' ')} ` +
      `(facts ${JSON.stringify(facts)}, after ${(Date.now() - start) / 1000} s)`);
    return false;
  }
}

async function main() {
  const only = onlyArg ? onlyArg.split(',') : Object.keys(STEPS);
  const results = await Promise.all(only.map(run));
  // The clients' timers may keep the loop alive after shutdown: exit with the result.
  process.exit(results.every(Boolean) ? 0 : 1);
}

main();
