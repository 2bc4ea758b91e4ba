'use strict';
// retryaudit's execution hooks for n8n (2.x): n8n loads this file when
// EXTERNAL_HOOK_FILES names it, in every process that runs executions (the
// main process and, in queue mode, each worker). It tells retryaudit when an
// execution starts and ends, first-hand: its id, workflow, mode, the
// execution it retries, n8n's own start time, its status, last node and
// error. Nothing else of the run data leaves n8n.
//
// Configuration, from n8n's environment:
//   RETRYAUDIT_URL         the service, e.g. http://127.0.0.1:8080
//   RETRYAUDIT_HOOK_TOKEN  its hook token (or RETRYAUDIT_HOOK_TOKEN_FILE)
//   RETRYAUDIT_HOOK_TIMEOUT  optional: seconds a call may take (default 5)
// Without both, the file logs one line and registers no hook.
//
// It never slows or fails an execution: the hooks only queue a report and
// return. A background sender posts the queue in batches with a short
// timeout, retries with backoff and jitter, keeps at most a bounded number of
// reports (the oldest are dropped, and counted, when the service is away for
// long), logs one line per kind of failure and throws nothing into n8n.
// Reconciliation in retryaudit finds what could not be delivered.
//
// Plain JavaScript, no dependencies: n8n require()s it as it is.

const http = require('node:http');
const https = require('node:https');
const fs = require('node:fs');

const PATH = 'v1/n8n/executions';
const DEFAULTS = {
  queueSize: 1000, // reports kept while the service is away
  batchSize: 100, // reports per call (the service takes at most 100)
  batchBytes: 256 * 1024, // body bytes per call
  timeoutMs: 5000, // per call, connection to answer
  minBackoffMs: 500,
  maxBackoffMs: 30000,
  relogMs: 60 * 60 * 1000, // a failure kind is logged again after an hour
  cacheSize: 10000, // executions whose start this process remembers
};
// What the service accepts (audit.N8NHookReport.Validate).
const STATUSES = new Set(['success', 'error', 'crashed', 'canceled', 'waiting']);
const LIMITS = { id: 100, name: 500, mode: 40, message: 4000, httpCode: 20 };

// text returns v as a string of at most max characters; control characters
// (line breaks too, unless lines) become spaces, as the service refuses them.
function text(v, max, lines) {
  if (v === undefined || v === null) return '';
  let s = typeof v === 'string' ? v : String(v);
  s = lines ? s.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, ' ')
    : s.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
  if (s.length > max) s = Array.from(s).slice(0, max).join('');
  return s;
}

function iso(v) {
  if (v === undefined || v === null || v === '') return '';
  const d = v instanceof Date ? v : new Date(v);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

// earliestStart is when a run began by its own data: a run resumed after a
// Wait node carries the resume time as startedAt, its first node the
// original start. Used only when n8n's stored start time cannot be read.
function earliestStart(run) {
  let t = run && run.startedAt ? new Date(run.startedAt).getTime() : NaN;
  const runData = run && run.data && run.data.resultData && run.data.resultData.runData;
  if (runData && typeof runData === 'object') {
    for (const tasks of Object.values(runData)) {
      const s = Array.isArray(tasks) && tasks[0] && tasks[0].startTime;
      if (typeof s === 'number' && (Number.isNaN(t) || s < t)) t = s;
    }
  }
  return Number.isNaN(t) ? '' : new Date(t).toISOString();
}

// createSender returns the queue and its background sender.
function createSender(cfg) {
  const base = cfg.url.endsWith('/') ? cfg.url : cfg.url + '/';
  const target = new URL(PATH, base);
  const transport = target.protocol === 'https:' ? https : http;
  const agent = new transport.Agent({ keepAlive: true, maxSockets: 1 });
  const queue = []; // JSON texts of reports, oldest first
  const stats = { queued: 0, sent: 0, dropped: 0, refused: 0, failedCalls: 0 };
  const logged = new Map(); // failure kind → when it was last logged
  let batchBytes = cfg.batchBytes;
  let inFlight = false;
  let timer = null;
  let attempt = 0;
  let notBefore = 0;
  let failingSince = 0;

  function note(kind, message) {
    const now = Date.now();
    const last = logged.get(kind);
    if (last !== undefined && now - last < cfg.relogMs) return;
    logged.set(kind, now);
    cfg.log(message);
  }

  function trim() {
    const over = queue.length - cfg.queueSize;
    if (over > 0) {
      queue.splice(0, over);
      stats.dropped += over;
      note('full', `the queue is full (${cfg.queueSize} reports): dropping the oldest (${stats.dropped} so far); ` +
        'retryaudit\'s reconciliation finds the failures among them');
    }
  }

  function schedule(delay) {
    if (timer || inFlight || queue.length === 0) return;
    timer = setTimeout(flush, Math.max(0, delay));
    timer.unref();
  }

  function push(report) {
    queue.push(JSON.stringify(report));
    stats.queued++;
    trim();
    schedule(notBefore - Date.now());
  }

  function flush() {
    timer = null;
    if (inFlight || queue.length === 0) return;
    const wait = notBefore - Date.now();
    if (wait > 0) {
      schedule(wait);
      return;
    }
    let n = 0;
    let bytes = 0;
    while (n < queue.length && n < cfg.batchSize && (n === 0 || bytes + queue[n].length + 1 <= batchBytes)) {
      bytes += queue[n].length + 1;
      n++;
    }
    const batch = queue.splice(0, n);
    inFlight = true;
    post(batch, (outcome) => {
      inFlight = false;
      try {
        settle(batch, outcome);
      } catch (e) {
        note('internal', `a call's answer could not be handled: ${e && e.message}`);
      }
      schedule(notBefore - Date.now());
    });
  }

  function post(batch, done) {
    const body = Buffer.from('{"reports":[' + batch.join(',') + ']}');
    let finished = false;
    const end = (outcome) => {
      if (finished) return;
      finished = true;
      clearTimeout(deadline);
      done(outcome);
    };
    let req;
    const deadline = setTimeout(() => {
      end({ kind: 'timeout', message: `no answer within ${cfg.timeoutMs} ms` });
      if (req) req.destroy();
    }, cfg.timeoutMs);
    deadline.unref();
    try {
      req = transport.request(target, {
        method: 'POST', agent,
        headers: {
          'Content-Type': 'application/json', 'Content-Length': body.length,
          Authorization: 'Bearer ' + cfg.token, 'User-Agent': 'retryaudit-n8n-hooks',
        },
      }, (res) => {
        const chunks = [];
        let size = 0;
        res.on('data', (c) => {
          if (size < 65536) chunks.push(c);
          size += c.length;
        });
        res.on('end', () => end({ status: res.statusCode, retryAfter: res.headers['retry-after'],
          body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (e) => end({ kind: 'unreachable', message: e.message }));
      });
      req.on('error', (e) => end({ kind: e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' ? 'unreachable' : 'network',
        message: e.message }));
      req.end(body);
    } catch (e) {
      end({ kind: 'network', message: e && e.message });
    }
  }

  function serviceMessage(body) {
    try {
      const e = JSON.parse(body).error;
      return { message: e && e.message ? String(e.message) : '', fields: (e && e.fields) || {} };
    } catch (_) {
      return { message: String(body).slice(0, 200), fields: {} };
    }
  }

  function settle(batch, o) {
    if (o.status >= 200 && o.status < 300) {
      stats.sent += batch.length;
      attempt = 0;
      notBefore = 0;
      if (failingSince) {
        cfg.log(`delivering again (${stats.failedCalls} calls failed since ${new Date(failingSince).toISOString()}; ` +
          `${stats.dropped} reports dropped so far)`);
        failingSince = 0;
        logged.clear();
      }
      return;
    }
    const said = o.status ? serviceMessage(o.body) : { message: o.message, fields: {} };
    if (o.status === 422) {
      // Nothing of the call was recorded: send again all but the reports
      // the service named.
      const bad = new Set();
      for (const field of Object.keys(said.fields)) {
        const m = /^reports\[(\d+)\]/.exec(field);
        if (m) bad.add(Number(m[1]));
      }
      const good = bad.size === 0 ? [] : batch.filter((_, i) => !bad.has(i));
      stats.refused += batch.length - good.length;
      note('refused', `the service refused ${batch.length - good.length} report(s) (422): ${said.message}`);
      queue.unshift(...good);
      return;
    }
    if (o.status === 413 && batch.length > 1) {
      batchBytes = Math.max(4096, Math.floor(batchBytes / 2));
      queue.unshift(...batch);
      return;
    }
    if (o.status && o.status < 500 && ![401, 403, 404, 408, 429].includes(o.status)) {
      stats.refused += batch.length;
      note('refused', `the service refused ${batch.length} report(s) (${o.status}): ${said.message}`);
      return;
    }
    // Worth another try: the service is away, busy, or refuses the token
    // (an administrator may be fixing it). The batch goes back first in line.
    stats.failedCalls++;
    if (!failingSince) failingSince = Date.now();
    queue.unshift(...batch);
    trim();
    attempt++;
    const backoff = Math.min(cfg.maxBackoffMs, cfg.minBackoffMs * 2 ** Math.min(attempt - 1, 20));
    let wait = backoff / 2 + Math.random() * backoff / 2;
    const after = Number(o.retryAfter);
    if (after > 0) wait = Math.max(wait, Math.min(after * 1000, cfg.maxBackoffMs));
    notBefore = Date.now() + wait;
    const kind = o.status ? 'http ' + o.status : o.kind;
    let why = o.status ? `answered ${o.status}: ${said.message}` : said.message;
    if (o.status === 401 || o.status === 403) why += ' (check RETRYAUDIT_HOOK_TOKEN: it is the service\'s hook token, not its API token)';
    note(kind, `cannot deliver to ${target.href}: ${why}; retrying with backoff, the reports wait in memory`);
  }

  return {
    push, stats,
    pending: () => queue.length + (inFlight ? 1 : 0),
  };
}

// n8nInternals reaches into n8n for what its public hooks do not give: the
// start of an execution with its id (an execution-lifecycle handler), and
// the start time and Retry lineage n8n stored (its execution repository).
// It returns null, having said why, when this n8n does not have them.
function n8nInternals(log) {
  try {
    const req = require.main && require.main.require;
    if (!req) throw new Error('no require.main');
    const { Container } = req('@n8n/di');
    const { LifecycleMetadata } = req('@n8n/decorators');
    const { ExecutionRepository } = req('@n8n/db');
    if (!Container || !LifecycleMetadata || !ExecutionRepository) throw new Error('n8n\'s modules lack what the hooks use');
    return {
      onStart(fn) {
        class RetryauditHooks {
          workflowExecuteBefore(ctx) {
            try {
              fn(ctx);
            } catch (_) { /* never into n8n */ }
          }
        }
        Container.set(RetryauditHooks, new RetryauditHooks());
        Container.get(LifecycleMetadata).register({ handlerClass: RetryauditHooks,
          methodName: 'workflowExecuteBefore', eventName: 'workflowExecuteBefore' });
      },
      async execution(id) {
        const row = await Container.get(ExecutionRepository).findOne({ where: { id: String(id) },
          select: ['id', 'mode', 'retryOf', 'startedAt'] });
        return row ? { startedAt: iso(row.startedAt), retryOf: row.retryOf ? String(row.retryOf) : '' } : null;
      },
    };
  } catch (e) {
    log(`n8n's internals are not reachable (${e && e.message}): sending execution ends only, ` +
      'with the start time and Retry lineage their run data holds');
    return null;
  }
}

// createHooks returns the hooks n8n registers, and the sender behind them.
// opts: url, token, log, internals (null for none; n8n's by default), and
// any of DEFAULTS.
function createHooks(opts) {
  const cfg = Object.assign({}, DEFAULTS, opts);
  cfg.log = cfg.log || ((m) => console.warn('retryaudit hooks: ' + m));
  const sender = createSender(cfg);
  const internals = cfg.internals === undefined ? n8nInternals(cfg.log) : cfg.internals;
  const known = new Map(); // execution id → promise of what n8n stored about it
  const ignored = new Set();

  function stored(id) {
    let p = known.get(id);
    if (!p) {
      p = internals ? internals.execution(id).catch((e) => {
        if (!ignored.has('lookup')) {
          ignored.add('lookup');
          cfg.log(`n8n's stored start time could not be read (${e && e.message}): using the run's own`);
        }
        return null;
      }) : Promise.resolve(null);
      known.set(id, p);
      if (known.size > cfg.cacheSize) known.delete(known.keys().next().value);
    }
    return p;
  }

  function queue(report) {
    const problem = invalid(report);
    if (problem) {
      if (!ignored.has(problem)) {
        ignored.add(problem);
        cfg.log(`not sending a report the service would refuse (${problem}; execution ${report.execution_id})`);
      }
      return;
    }
    sender.push(report);
  }

  function onStart(ctx) {
    // Without a workflow instance n8n is only handing the execution to a
    // worker (queue mode): the process that runs it reports its start.
    if (!ctx || !ctx.workflowInstance || ctx.executionId === undefined) return;
    const id = String(ctx.executionId);
    const wf = ctx.workflow || {};
    stored(id).then((row) => {
      queue({
        phase: 'start', execution_id: text(id, LIMITS.id), workflow_id: text(wf.id, LIMITS.id),
        workflow_name: text(wf.name, LIMITS.name), mode: text(ctx.mode, LIMITS.mode),
        retry_of: text(row && row.retryOf, LIMITS.id), started_at: (row && row.startedAt) || iso(new Date()),
      });
    }).catch(() => {});
  }

  function postExecute(run, workflowData, executionId) {
    try {
      // A run that carries a job id is the copy the enqueuing process gets
      // of a job a worker ran (queue mode): the worker reports it.
      if (!run || run.jobId !== undefined || executionId === undefined || executionId === null) return;
      const id = String(executionId);
      const wf = workflowData || {};
      const result = (run.data && run.data.resultData) || {};
      const error = result.error || {};
      const errorNode = error.node && typeof error.node === 'object' ? error.node.name : error.node;
      const stoppedAt = iso(run.stoppedAt) || iso(new Date());
      const fallbackStart = earliestStart(run) || stoppedAt;
      const report = {
        phase: 'end', execution_id: text(id, LIMITS.id), workflow_id: text(wf.id, LIMITS.id),
        workflow_name: text(wf.name, LIMITS.name), mode: text(run.mode, LIMITS.mode),
        status: text(run.status, 20), last_node: text(result.lastNodeExecuted, LIMITS.name),
      };
      if (result.error) {
        report.error = { message: text(error.message, LIMITS.message, true), node: text(errorNode, LIMITS.name),
          http_code: text(error.httpCode, LIMITS.httpCode) };
      }
      stored(id).then((row) => {
        if (run.status !== 'waiting') known.delete(id);
        report.retry_of = text(row && row.retryOf, LIMITS.id);
        report.started_at = (row && row.startedAt) || fallbackStart;
        report.stopped_at = stoppedAt < report.started_at ? report.started_at : stoppedAt;
        queue(report);
      }).catch(() => {});
    } catch (e) {
      if (!ignored.has('internal')) {
        ignored.add('internal');
        cfg.log(`an execution's end could not be read: ${e && e.message}`);
      }
    }
  }

  if (internals) internals.onStart(onStart);
  return {
    hooks: { workflow: { postExecute: [postExecute] } },
    sender,
    onStart,
  };
}

// invalid names what the service would refuse in a report, or ''.
function invalid(r) {
  if (!r.execution_id) return 'no execution id';
  if (!r.workflow_id) return 'no workflow id';
  if (!r.mode) return 'no mode';
  if (!r.started_at) return 'no start time';
  if (r.phase === 'end' && !STATUSES.has(r.status)) return `status "${r.status}"`;
  return '';
}

// fromEnv reads the configuration from n8n's environment; null when unset.
function fromEnv(env, log) {
  let token = env.RETRYAUDIT_HOOK_TOKEN || '';
  if (!token && env.RETRYAUDIT_HOOK_TOKEN_FILE) {
    try {
      token = fs.readFileSync(env.RETRYAUDIT_HOOK_TOKEN_FILE, 'utf8').trim();
    } catch (e) {
      log(`RETRYAUDIT_HOOK_TOKEN_FILE cannot be read (${e.message}): the hooks send nothing`);
      return null;
    }
  }
  const url = (env.RETRYAUDIT_URL || '').trim();
  if (!url || !token) {
    log('RETRYAUDIT_URL or RETRYAUDIT_HOOK_TOKEN is unset: the hooks send nothing');
    return null;
  }
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
  } catch (e) {
    log(`RETRYAUDIT_URL is not an http(s) URL (${e.message}): the hooks send nothing`);
    return null;
  }
  const cfg = { url, token: token.trim() };
  if (env.RETRYAUDIT_HOOK_TIMEOUT) {
    const seconds = Number(env.RETRYAUDIT_HOOK_TIMEOUT);
    if (seconds > 0 && seconds <= 300) cfg.timeoutMs = seconds * 1000;
    else log(`RETRYAUDIT_HOOK_TIMEOUT=${env.RETRYAUDIT_HOOK_TIMEOUT} is not a number of seconds from 0 to 300: using 5`);
  }
  return cfg;
}

function load() {
  const log = (m) => console.warn('retryaudit hooks: ' + m);
  try {
    const cfg = fromEnv(process.env, log);
    if (!cfg) return {};
    const made = createHooks(Object.assign(cfg, { log }));
    log(`reporting execution starts and ends to ${cfg.url}`);
    return made.hooks;
  } catch (e) {
    log(`not loaded: ${e && e.message}`);
    return {};
  }
}

module.exports = load();
// For the tests; not enumerable, so n8n does not take it for a hook.
Object.defineProperty(module.exports, 'retryaudit', { value: { createHooks, fromEnv, text, earliestStart } });
