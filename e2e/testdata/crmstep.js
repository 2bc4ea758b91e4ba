// Runs the code of the orders workflow's "Create CRM order" node as n8n's
// Code node does for one item (the code is the body of an async function;
// this.helpers.httpRequest makes requests), against a CRM whose answers come
// from the case on standard input. Prints the node's result or error and the
// requests it made.
'use strict';
const fs = require('fs');

const code = fs.readFileSync(process.argv[2], 'utf8');
const tc = JSON.parse(fs.readFileSync(0, 'utf8'));
const calls = [];
const helpers = {
  async httpRequest(req) {
    calls.push({ method: req.method, url: req.url, qs: req.qs || {}, headers: req.headers || {}, body: req.body,
      json: req.json, timeout: req.timeout });
    const a = tc.answers[calls.length - 1];
    if (!a) throw new Error(`the CRM was not expected to be asked ${req.method} ${req.url}`);
    if (a.timeout) {
      const e = new Error(`timeout of ${req.timeout}ms exceeded`);
      e.code = 'ECONNABORTED';
      throw e;
    }
    if (a.status >= 400) {
      const e = new Error(`Request failed with status code ${a.status}`);
      e.httpCode = String(a.status);
      throw e;
    }
    return a.body;
  },
};
const event = { source: 'shop', event_id: '1042', order: { id: '1042', total: '42.50', currency: 'EUR' } };
const $ = (name) => {
  if (name !== 'Event') throw new Error(`Referenced node doesn't exist: ${name}`);
  return { item: { json: event } };
};
// The item: the HTTP template's claim answer, and what the retryaudit node's
// Claim outputs (the webhook's item with the claim's data in retryaudit).
const $json = {
  process: true, decision: 'claimed', idempotency_key: 'ra_test_key',
  body: event.order,
  retryaudit: { source: 'shop', event_id: '1042', run_stamp: '41:1767225600000:abcdef0123', decision: 'claimed',
    process: true, idempotency_key: 'ra_test_key' },
};
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
const node = new AsyncFunction('$', '$json', code);
const print = (o) => process.stdout.write(JSON.stringify({ ...o, calls }));
node.call({ helpers }, $, $json).then((result) => print({ result }), (error) => print({ error: String(error.message) }));
