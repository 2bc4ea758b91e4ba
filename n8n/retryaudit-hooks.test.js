'use strict';
// The hooks file against a local HTTP server standing in for retryaudit:
// node --test n8n/retryaudit-hooks.test.js (hooksjs_test.go runs it).

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const path = require('node:path');
const { spawn } = require('node:child_process');

const FILE = path.join(__dirname, 'retryaudit-hooks.js');
const { createHooks, fromEnv, text, earliestStart } = require(FILE).retryaudit;

// service is a stand-in for retryaudit: answer(req, body) decides each reply
// (default 202); calls keeps every call's reports.
async function service(t, answer) {
  const calls = [];
  const hung = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const call = { auth: req.headers.authorization, path: req.url, reports: body.reports };
      calls.push(call);
      const a = answer ? answer(call, calls.length) : { status: 202 };
      if (a === 'hang') {
        hung.push(res);
        return;
      }
      res.writeHead(a.status, Object.assign({ 'Content-Type': 'application/json' }, a.headers));
      res.end(JSON.stringify(a.body || { results: [] }));
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const res of hung) res.destroy();
    srv.closeAllConnections();
    srv.close();
  });
  return { url: `http://127.0.0.1:${srv.address().port}`, calls };
}

// closedPort returns the URL of a port nothing listens on.
async function closedPort() {
  const srv = http.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${srv.address().port}`;
  await new Promise((r) => srv.close(r));
  return url;
}

function hooksFor(url, extra) {
  const lines = [];
  const made = createHooks(Object.assign({ url, token: 'hook-secret', internals: null, minBackoffMs: 5,
    maxBackoffMs: 20, timeoutMs: 300, log: (m) => lines.push(m) }, extra));
  made.lines = lines;
  made.end = made.hooks.workflow.postExecute[0];
  return made;
}

function run(id, over) {
  return [Object.assign({ mode: 'webhook', status: 'success', startedAt: new Date('2026-01-02T03:04:05.000Z'),
    stoppedAt: new Date('2026-01-02T03:04:06.000Z'), data: { resultData: { lastNodeExecuted: 'Create CRM order' } } }, over),
  { id: 'wf1', name: 'Orders to CRM' }, String(id)];
}

async function until(what, cond, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`still not so after ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('an end is posted with what n8n knows and the hook token', async (t) => {
  const svc = await service(t);
  const h = hooksFor(svc.url);
  const [r, wf, id] = run(7, { status: 'error', data: { resultData: { lastNodeExecuted: 'Create CRM order',
    error: { message: 'CRM answered 500\nretry later', node: { name: 'Create CRM order', parameters: { secret: 'x' } }, httpCode: 500 },
    runData: { Webhook: [{ startTime: Date.parse('2026-01-02T03:04:04.500Z') }] } } } });
  h.end(r, wf, id);
  await until('one call', () => svc.calls.length === 1);
  const c = svc.calls[0];
  assert.strictEqual(c.auth, 'Bearer hook-secret');
  assert.strictEqual(c.path, '/v1/n8n/executions');
  assert.deepStrictEqual(c.reports, [{
    phase: 'end', execution_id: '7', workflow_id: 'wf1', workflow_name: 'Orders to CRM', mode: 'webhook',
    status: 'error', last_node: 'Create CRM order', retry_of: '',
    started_at: '2026-01-02T03:04:04.500Z', stopped_at: '2026-01-02T03:04:06.000Z',
    error: { message: 'CRM answered 500\nretry later', node: 'Create CRM order', http_code: '500' },
  }], 'the run data itself (the node parameters, the items) must never be sent');
});

test('the hooks return at once while the service hangs, and the call times out', async (t) => {
  const svc = await service(t, () => 'hang');
  const h = hooksFor(svc.url, { timeoutMs: 200 });
  for (let i = 0; i < 500; i++) {
    // A synchronous return: nothing awaited the network.
    assert.strictEqual(h.end(...run(i)), undefined);
  }
  await new Promise((r) => setImmediate(r));
  assert.ok(h.sender.pending() > 0, 'the reports wait in the queue');
  await until('a timed-out call', () => h.sender.stats.failedCalls >= 2);
  assert.ok(svc.calls.length >= 2, 'the sender tried again after the timeout');
  assert.strictEqual(h.lines.filter((l) => l.includes('no answer within')).length, 1,
    `one log line per failure kind, not per failure: ${JSON.stringify(h.lines)}`);
});

test('the service down: nothing throws, the queue is bounded, the oldest are dropped and counted', async (t) => {
  const h = hooksFor(await closedPort(), { queueSize: 10 });
  for (let i = 0; i < 25; i++) h.end(...run(i));
  await until('failed calls', () => h.sender.stats.failedCalls >= 3);
  assert.ok(h.sender.pending() <= 11, `${h.sender.pending()} reports held; at most the queue and one batch`);
  assert.ok(h.sender.stats.dropped >= 14, `dropped ${h.sender.stats.dropped}`);
  const kinds = h.lines.filter((l) => l.startsWith('cannot deliver'));
  assert.strictEqual(kinds.length, 1, `one line for "unreachable" however often it failed: ${JSON.stringify(h.lines)}`);
  assert.strictEqual(h.lines.filter((l) => l.startsWith('the queue is full')).length, 1);
});

test('batches hold at most 100 reports and every report arrives once, in order', async (t) => {
  const svc = await service(t);
  const h = hooksFor(svc.url);
  for (let i = 0; i < 250; i++) h.end(...run(i));
  await until('250 reports', () => svc.calls.reduce((n, c) => n + c.reports.length, 0) === 250);
  assert.ok(svc.calls.every((c) => c.reports.length <= 100), svc.calls.map((c) => c.reports.length).join(','));
  assert.ok(svc.calls.length >= 3);
  const ids = svc.calls.flatMap((c) => c.reports.map((r) => Number(r.execution_id)));
  assert.deepStrictEqual(ids, [...Array(250).keys()]);
});

test('a failed call is retried with backoff, honouring Retry-After, and delivered once', async (t) => {
  const svc = await service(t, (_, n) => n <= 2 ? { status: 503, headers: { 'Retry-After': '0' },
    body: { error: { message: 'the database is unavailable' } } } : { status: 202 });
  const h = hooksFor(svc.url);
  h.end(...run(1));
  h.end(...run(2));
  await until('three calls', () => svc.calls.length === 3);
  assert.deepStrictEqual(svc.calls.map((c) => c.reports.map((r) => r.execution_id).join()), ['1,2', '1,2', '1,2']);
  await until('delivered', () => h.sender.stats.sent === 2);
  assert.ok(h.lines.some((l) => l.startsWith('delivering again')), JSON.stringify(h.lines));
  assert.strictEqual(h.lines.filter((l) => l.includes('answered 503')).length, 1);
});

test('a 401 is retried and says which token', async (t) => {
  const svc = await service(t, (_, n) => n === 1 ? { status: 401, body: { error: { message: 'send the hook token' } } } : { status: 202 });
  const h = hooksFor(svc.url);
  h.end(...run(1));
  await until('delivered', () => h.sender.stats.sent === 1);
  assert.ok(h.lines.some((l) => l.includes('RETRYAUDIT_HOOK_TOKEN')), JSON.stringify(h.lines));
});

test('a 422 drops only the reports it names, and the rest are sent again', async (t) => {
  const svc = await service(t, (_, n) => n === 1 ? { status: 422, body: { error: { code: 'validation_failed',
    message: 'invalid request', fields: { 'reports[1].started_at': 'required' } } } } : { status: 202 });
  const h = hooksFor(svc.url);
  h.end(...run(1));
  h.end(...run(2));
  h.end(...run(3));
  await until('two calls', () => svc.calls.length === 2);
  assert.deepStrictEqual(svc.calls[1].reports.map((r) => r.execution_id), ['1', '3']);
  await until('sent', () => h.sender.stats.sent === 2);
  assert.strictEqual(h.sender.stats.refused, 1);
});

test('what n8n sends that the service would refuse is cleaned or kept back, never thrown', async (t) => {
  const svc = await service(t);
  const h = hooksFor(svc.url);
  const hostile = {};
  Object.defineProperty(hostile, 'data', { get() { throw new Error('a getter that throws'); } });
  for (const args of [[], [null], [undefined, undefined, undefined], [hostile, {}, '9'], [{}, null, 5],
    [{ status: 'running', mode: 'webhook', startedAt: new Date() }, { id: 'w' }, '10']]) {
    assert.doesNotThrow(() => h.end(...args));
  }
  h.end(...run('11', { mode: 'webhook' }).map((a, i) => i === 1 ? { id: 'w', name: 'tab\there\u0085' } : a));
  await until('one call', () => svc.calls.length === 1);
  assert.deepStrictEqual(svc.calls[0].reports.map((r) => [r.execution_id, r.workflow_name]), [['11', 'tab here ']]);
  assert.strictEqual(text('x'.repeat(600), 500).length, 500);
  assert.strictEqual(earliestStart({}), '');
});

test('with n8n\'s internals: starts with n8n\'s stored start time and lineage; queued copies are not reported twice', async (t) => {
  const svc = await service(t);
  let onStart;
  const lookups = [];
  const internals = {
    onStart(fn) { onStart = fn; },
    async execution(id) {
      lookups.push(id);
      return { startedAt: '2026-01-02T03:04:04.900Z', retryOf: id === '8' ? '7' : '' };
    },
  };
  const h = hooksFor(svc.url, { internals });
  // Queue mode's main process hands execution 8 to a worker: no workflow instance.
  onStart({ executionId: '8', mode: 'retry', workflow: { id: 'wf1', name: 'Orders' } });
  onStart({ executionId: '8', mode: 'retry', workflow: { id: 'wf1', name: 'Orders' }, workflowInstance: {} });
  h.end(...run(8, { mode: 'retry' }));
  h.end(...run(8, { mode: 'retry', jobId: '8' })); // the main process's copy of the worker's job
  await until('two reports', () => svc.calls.reduce((n, c) => n + c.reports.length, 0) === 2);
  const reports = svc.calls.flatMap((c) => c.reports);
  assert.deepStrictEqual(reports.map((r) => [r.phase, r.execution_id, r.mode, r.retry_of, r.started_at]), [
    ['start', '8', 'retry', '7', '2026-01-02T03:04:04.900Z'],
    ['end', '8', 'retry', '7', '2026-01-02T03:04:04.900Z'],
  ]);
  assert.deepStrictEqual(lookups, ['8'], 'the end reuses what the start read');
});

test('unconfigured, the file registers no hook and says so once', () => {
  const lines = [];
  assert.strictEqual(fromEnv({}, (m) => lines.push(m)), null);
  assert.strictEqual(fromEnv({ RETRYAUDIT_URL: 'ftp://x', RETRYAUDIT_HOOK_TOKEN: 't' }, (m) => lines.push(m)), null);
  assert.strictEqual(lines.length, 2);
  assert.deepStrictEqual(fromEnv({ RETRYAUDIT_URL: 'http://s:8080', RETRYAUDIT_HOOK_TOKEN: ' t ' }, () => {}),
    { url: 'http://s:8080', token: 't' });
  assert.deepStrictEqual(fromEnv({ RETRYAUDIT_URL: 'http://s', RETRYAUDIT_HOOK_TOKEN: 't', RETRYAUDIT_HOOK_TIMEOUT: '30' }, () => {}),
    { url: 'http://s', token: 't', timeoutMs: 30000 });
});

// child runs the hooks file in a process of its own, as n8n loads it.
function child(env, script) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', script], { env: Object.assign({ PATH: process.env.PATH }, env) });
    let out = '';
    p.stdout.on('data', (c) => out += c);
    p.stderr.on('data', (c) => out += c);
    const kill = setTimeout(() => p.kill('SIGKILL'), 30000);
    p.on('exit', (code, signal) => {
      clearTimeout(kill);
      resolve({ code, signal, out });
    });
  });
}

test('the sender does not keep n8n\'s process alive', async () => {
  const url = await closedPort();
  const r = await child({ RETRYAUDIT_URL: url, RETRYAUDIT_HOOK_TOKEN: 't' }, `
    const h = require(${JSON.stringify(FILE)});
    h.workflow.postExecute[0]({ mode: 'webhook', status: 'success', startedAt: new Date(), stoppedAt: new Date() }, { id: 'w' }, '1');
    console.log('returned');`);
  assert.strictEqual(r.signal, null, `the process did not end by itself: ${r.out}`);
  assert.strictEqual(r.code, 0, r.out);
  assert.match(r.out, /returned/);
});

test('loaded by n8n without configuration, the file exports no hook', async () => {
  const r = await child({}, `const h = require(${JSON.stringify(FILE)}); console.log(JSON.stringify(h));`);
  assert.strictEqual(r.code, 0, r.out);
  assert.match(r.out, /RETRYAUDIT_URL or RETRYAUDIT_HOOK_TOKEN is unset/);
  assert.match(r.out, /^\{\}$/m);
});
