// Unit tests of the retryaudit node: the requests it builds and where it
// routes items, against a fake n8n and a scripted service (no network).
// Run after the build: npm run build && npm test.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Retryaudit } = require('../dist/nodes/Retryaudit/Retryaudit.node.js');
const { RetryauditApi } = require('../dist/credentials/RetryauditApi.credentials.js');
const { fakeN8n, claimAnswer, serviceError, slept, forgetStamps } = require('./fake.js');

const claimParams = (extra = {}) => ({
	operation: 'claim',
	source: 'shop',
	eventId: (i) => String(1042 + i),
	claimOptions: {},
	...extra,
});

async function execute(fake) {
	return new Retryaudit().execute.call(fake.ctx);
}

const STAMP = /^41:\d{13}:[0-9a-f]{10}$/;

test('claim: the request carries the event, the execution, the workflow, the mode and a run stamp', async () => {
	forgetStamps();
	const f = fakeN8n({ params: claimParams(), answers: [claimAnswer('claimed')] });
	await execute(f);
	assert.equal(f.requests.length, 1);
	const r = f.requests[0];
	assert.equal(r.credentialType, 'retryauditApi');
	assert.equal(r.method, 'POST');
	assert.equal(
		r.url,
		'http://ra.test:8080/v1/claims',
		'the trailing slash of the service URL is dropped',
	);
	assert.equal(r.json, true);
	assert.equal(r.returnFullResponse, true);
	assert.equal(r.ignoreHttpStatusErrors, true);
	assert.equal(r.timeout, 10000);
	assert.equal(r.headers, undefined, 'the token goes only through the credential');
	const { run_stamp: stamp, ...rest } = r.body;
	assert.match(stamp, STAMP);
	assert.deepEqual(rest, {
		source: 'shop',
		event_id: '1042',
		execution_id: '41',
		workflow_id: 'wfOrders',
		workflow_name: 'Orders to CRM',
		node: 'Claim',
		mode: 'webhook',
	});
});

test('claim: the options add fingerprint, delivery id and items; empty ones are left out', async () => {
	forgetStamps();
	const f = fakeN8n({
		params: claimParams({
			claimOptions: { fingerprint: '42.50:EUR', deliveryId: 'd-7', items: 'line-1, line-2,,' },
		}),
		answers: [claimAnswer('claimed')],
	});
	await execute(f);
	assert.equal(f.requests[0].body.fingerprint, '42.50:EUR');
	assert.equal(f.requests[0].body.delivery_id, 'd-7');
	assert.deepEqual(f.requests[0].body.items, ['line-1', 'line-2']);

	const g = fakeN8n({
		params: claimParams({ claimOptions: { fingerprint: '', deliveryId: '', items: ['a', 2] } }),
		answers: [claimAnswer('claimed')],
	});
	await execute(g);
	assert.ok(!('fingerprint' in g.requests[0].body));
	assert.ok(!('delivery_id' in g.requests[0].body));
	assert.deepEqual(g.requests[0].body.items, ['a', '2'], 'an expression may give a list');
});

test('claim: routes each decision to Act or Skip', async (t) => {
	const cases = [
		{ decision: 'claimed', out: 'act' },
		{ decision: 'held', out: 'act' },
		{ decision: 'reclaimed', out: 'act' },
		{
			decision: 'duplicate',
			out: 'skip',
			reason: /shop\/1042 is done already \(by execution 40\)/,
		},
		{ decision: 'in_progress', out: 'skip', reason: /execution 40 holds shop\/1042/ },
		{ decision: 'cancelled', out: 'skip', reason: /a person cancelled shop\/1042/ },
	];
	for (const c of cases) {
		await t.test(`${c.decision} goes to ${c.out}`, async () => {
			forgetStamps();
			const f = fakeN8n({
				params: claimParams(),
				items: [{ json: { body: { id: '1042' }, headers: {} } }],
				answers: [claimAnswer(c.decision)],
			});
			const [act, skip] = await execute(f);
			const [mine, other] = c.out === 'act' ? [act, skip] : [skip, act];
			assert.equal(mine.length, 1);
			assert.equal(other.length, 0);
			const item = mine[0];
			assert.deepEqual(item.pairedItem, { item: 0 });
			assert.deepEqual(item.json.body, { id: '1042' }, 'the item keeps its data');
			assert.equal(item.json.retryaudit.decision, c.decision);
			assert.equal(item.json.retryaudit.source, 'shop');
			assert.equal(item.json.retryaudit.event_id, '1042');
			assert.equal(item.json.retryaudit.idempotency_key, 'ra_key');
			assert.match(item.json.retryaudit.run_stamp, STAMP);
			if (c.reason) assert.match(item.json.retryaudit.reason, c.reason);
			else assert.equal(item.json.retryaudit.reason, undefined);
			assert.equal(f.custom.retryaudit_event, 'shop:1042');
			assert.equal(f.custom.retryaudit_decision, c.decision);
		});
	}
});

test("claim: the lineage note is part of Skip's reason", async () => {
	const f = fakeN8n({
		params: claimParams(),
		answers: [claimAnswer('in_progress', { lineage_note: 'send the run stamp' })],
	});
	const [, skip] = await execute(f);
	assert.match(skip[0].json.retryaudit.reason, /\(send the run stamp\)$/);
	assert.equal(skip[0].json.retryaudit.lineage_note, 'send the run stamp');
});

test("claim: a run stamp in the item (an earlier node's, or replayed by n8n's Retry) is sent and kept", async () => {
	forgetStamps();
	const replayed = '30:1767225600000:abcdef0123';
	const f = fakeN8n({
		params: claimParams(),
		executionId: '57',
		mode: 'retry',
		items: [{ json: { body: { id: '1042' }, retryaudit: { run_stamp: replayed } } }],
		answers: [claimAnswer('held')],
	});
	const [act] = await execute(f);
	assert.equal(f.requests[0].body.run_stamp, replayed);
	assert.equal(f.requests[0].body.execution_id, '57');
	assert.equal(f.requests[0].body.mode, 'retry');
	assert.equal(act[0].json.retryaudit.run_stamp, replayed);
});

test('claim: a malformed run stamp in the item fails the item, sending nothing', async () => {
	const f = fakeN8n({
		params: claimParams(),
		items: [{ json: { retryaudit: { run_stamp: 'has spaces in it' } } }],
	});
	await assert.rejects(execute(f), /is not a run stamp/);
	assert.equal(f.requests.length, 0);
});

test('claim: one stamp per execution, across items and when the node runs again in it', async () => {
	forgetStamps();
	const two = [{ json: {} }, { json: {} }];
	const f = fakeN8n({
		params: claimParams(),
		items: two,
		answers: [claimAnswer('claimed'), claimAnswer('claimed')],
	});
	await execute(f);
	const first = f.requests[0].body.run_stamp;
	assert.equal(f.requests[1].body.run_stamp, first, 'both items of one run');
	assert.equal(f.custom.retryaudit_run_stamp, first, "kept in n8n's custom execution data");

	// Retry On Fail runs the node again within execution 41: the same stamp.
	const again = fakeN8n({ params: claimParams(), answers: [claimAnswer('held')] });
	await execute(again);
	assert.equal(again.requests[0].body.run_stamp, first);

	// After a restart of n8n's process, from the custom execution data.
	forgetStamps();
	const restarted = fakeN8n({ params: claimParams(), answers: [claimAnswer('held')] });
	restarted.ctx.customData.set('retryaudit_run_stamp', first);
	await execute(restarted);
	assert.equal(restarted.requests[0].body.run_stamp, first);

	// Another execution makes its own.
	const other = fakeN8n({
		params: claimParams(),
		executionId: '42',
		answers: [claimAnswer('claimed')],
	});
	await execute(other);
	assert.match(other.requests[0].body.run_stamp, /^42:/);
});

test('claim: a Retry that runs the Claim again presents the stamp of the execution it retries (n8n copies its custom data)', async () => {
	forgetStamps();
	const f = fakeN8n({
		params: claimParams(),
		executionId: '57',
		mode: 'retry',
		answers: [claimAnswer('held')],
	});
	f.ctx.customData.set('retryaudit_run_stamp', '41:1767225600000:abcdef0123');
	const [act] = await execute(f);
	assert.equal(f.requests[0].body.run_stamp, '41:1767225600000:abcdef0123');
	assert.equal(f.requests[0].body.execution_id, '57');
	assert.equal(act[0].json.retryaudit.run_stamp, '41:1767225600000:abcdef0123');
});

test('claim: 503 busy is sent again after Retry-After, with the same stamp', async () => {
	forgetStamps();
	slept.length = 0;
	const f = fakeN8n({
		params: claimParams(),
		answers: [
			serviceError(503, 'busy', 'waited too long', { 'retry-after': '2' }),
			serviceError(503, 'unknown', 'the answer was lost', { 'retry-after': '1' }),
			claimAnswer('held'),
		],
	});
	const [act] = await execute(f);
	assert.equal(f.requests.length, 3);
	assert.deepEqual(f.requests[1].body, f.requests[0].body);
	assert.deepEqual(f.requests[2].body, f.requests[0].body);
	assert.deepEqual(slept, [2000, 1000]);
	assert.equal(act[0].json.retryaudit.decision, 'held');
});

test('claim: 503 past the tries fails the item clearly, waiting a bounded time', async () => {
	slept.length = 0;
	const unknown = () =>
		serviceError(503, 'unknown', 'the answer to the commit was lost', { 'retry-after': '600' });
	const f = fakeN8n({
		params: claimParams({ claimOptions: { tries: 3 } }),
		answers: [unknown(), unknown(), unknown()],
	});
	await assert.rejects(execute(f), (err) => {
		assert.match(err.message, /retryaudit could not claim shop\/1042: 503 unknown/);
		assert.match(err.message, /3 tries over 60 s/);
		assert.match(err.message, /may have been recorded/);
		assert.match(err.message, /Retry this execution/);
		return true;
	});
	assert.equal(f.requests.length, 3);
	assert.deepEqual(slept, [30000, 30000], 'a Retry-After is capped at 30 s');
});

test('claim: 429 is waited out like a 503', async () => {
	slept.length = 0;
	const f = fakeN8n({
		params: claimParams(),
		answers: [
			serviceError(429, 'too_many_wrong_tokens', 'slow down', { 'retry-after': '5' }),
			claimAnswer('claimed'),
		],
	});
	const [act] = await execute(f);
	assert.equal(act.length, 1);
	assert.deepEqual(slept, [5000]);
});

test('claim: no answer at all is sent again, then fails naming the service', async () => {
	slept.length = 0;
	const refused = () =>
		Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8080'), { code: 'ECONNREFUSED' });
	const f = fakeN8n({
		params: claimParams({ claimOptions: { tries: 2 } }),
		answers: [refused(), refused()],
	});
	await assert.rejects(execute(f), (err) => {
		assert.match(
			err.message,
			/^retryaudit at http:\/\/ra.test:8080 did not answer POST \/v1\/claims in 2 tries over 1 s/,
		);
		assert.match(err.description, /ECONNREFUSED/);
		return true;
	});
	assert.equal(f.requests.length, 2);

	const g = fakeN8n({ params: claimParams(), answers: [refused(), claimAnswer('claimed')] });
	const [act] = await execute(g);
	assert.equal(act.length, 1);
});

test("claim: a 4xx fails the item at once with the service's message", async () => {
	const f = fakeN8n({
		params: claimParams(),
		answers: [
			{
				status: 422,
				body: {
					error: {
						code: 'validation_failed',
						message: 'invalid',
						fields: { workflow_id: 'required' },
					},
				},
			},
		],
	});
	await assert.rejects(
		execute(f),
		/retryaudit refused to claim shop\/1042: 422 validation_failed: invalid \(workflow_id: required\)/,
	);
	assert.equal(f.requests.length, 1);

	const g = fakeN8n({
		params: claimParams(),
		answers: [serviceError(401, 'unauthorized', 'missing or wrong token')],
	});
	await assert.rejects(execute(g), /401 unauthorized: missing or wrong token/);
});

test('claim: an empty event id fails the item, sending nothing', async () => {
	const f = fakeN8n({ params: claimParams({ eventId: () => undefined }) });
	await assert.rejects(execute(f), /Event ID is empty/);
	assert.equal(f.requests.length, 0);
});

test('claim: with Continue On Fail, an item that cannot be claimed goes to Skip, never to Act', async () => {
	const f = fakeN8n({
		params: claimParams(),
		items: [{ json: { n: 1 } }, { json: { n: 2 } }],
		continueOnFail: true,
		answers: [serviceError(400, 'invalid_json', 'bad'), claimAnswer('claimed')],
	});
	const [act, skip] = await execute(f);
	assert.equal(act.length, 1);
	assert.equal(act[0].json.n, 2);
	assert.equal(skip.length, 1);
	assert.equal(skip[0].json.retryaudit.decision, 'error');
	assert.match(skip[0].json.retryaudit.reason, /400 invalid_json/);
	assert.deepEqual(skip[0].pairedItem, { item: 0 });
});

test('claim: without custom execution data (or where the edition refuses it) it carries on silently', async () => {
	for (const customData of ['none', 'throws']) {
		forgetStamps();
		const f = fakeN8n({ params: claimParams(), customData, answers: [claimAnswer('claimed')] });
		const [act] = await execute(f);
		assert.equal(act.length, 1, customData);
	}
});

const reportParams = (extra = {}) => ({
	operation: 'reportOutcome',
	outcome: 'done',
	crmRef: 'CRM-9',
	reason: '',
	reportOptions: {},
	...extra,
});
const claimed = {
	order: { id: '1042' },
	retryaudit: {
		source: 'shop',
		event_id: '1042',
		run_stamp: '41:1767225600000:abcdef0123',
		decision: 'claimed',
	},
};

test("report outcome: reads the claim's data from the item and reports as this execution", async () => {
	const f = fakeN8n({
		params: reportParams(),
		executionId: '57',
		mode: 'retry',
		items: [{ json: claimed }],
		answers: [
			{
				status: 200,
				body: { changed: true, status: 'done', needs_review: false, event_url: 'http://ra/e' },
			},
		],
	});
	const [out] = await execute(f);
	const r = f.requests[0];
	assert.equal(r.url, 'http://ra.test:8080/v1/outcomes');
	assert.deepEqual(r.body, {
		source: 'shop',
		event_id: '1042',
		execution_id: '57',
		workflow_id: 'wfOrders',
		outcome: 'done',
		crm_ref: 'CRM-9',
		run_stamp: '41:1767225600000:abcdef0123',
		mode: 'retry',
	});
	assert.equal(out.length, 1);
	assert.equal(out[0].json.retryaudit.status, 'done');
	assert.equal(out[0].json.retryaudit.changed, true);
	assert.equal(out[0].json.retryaudit.outcome, 'done');
	assert.equal(out[0].json.retryaudit.run_stamp, '41:1767225600000:abcdef0123');
	assert.deepEqual(out[0].json.order, { id: '1042' });
});

test('report outcome: failed with a reason; the options override the item', async () => {
	const f = fakeN8n({
		params: reportParams({
			outcome: 'FAILED',
			crmRef: '',
			reason: 'the CRM refused it (HTTP 422)',
			reportOptions: { source: 'market', eventId: '7', runStamp: '9:1:x', item: 'line-1' },
		}),
		items: [{ json: claimed }],
		answers: [{ status: 200, body: { changed: true, status: 'failed', needs_review: false } }],
	});
	await execute(f);
	const b = f.requests[0].body;
	assert.equal(b.outcome, 'failed');
	assert.equal(b.reason, 'the CRM refused it (HTTP 422)');
	assert.ok(!('crm_ref' in b));
	assert.equal(b.source, 'market');
	assert.equal(b.event_id, '7');
	assert.equal(b.run_stamp, '9:1:x');
	assert.equal(b.item, 'line-1');
});

test("report outcome: 409 not_holder fails the item with the service's message", async () => {
	const f = fakeN8n({
		params: reportParams(),
		items: [{ json: claimed }],
		answers: [
			serviceError(
				409,
				'not_holder',
				'execution 41 does not hold shop/1042 (holder 40, processing)',
			),
		],
	});
	await assert.rejects(
		execute(f),
		/retryaudit refused to record done for shop\/1042: 409 not_holder: execution 41 does not hold shop\/1042/,
	);
	const g = fakeN8n({
		params: reportParams({ outcome: 'failed' }),
		items: [{ json: claimed }],
		answers: [serviceError(409, 'conflict', 'done is final')],
	});
	await assert.rejects(execute(g), /409 conflict: done is final/);
});

test("report outcome: an item without the claim's data fails clearly, sending nothing", async () => {
	const f = fakeN8n({ params: reportParams(), items: [{ json: { outcome: 'done' } }] });
	await assert.rejects(execute(f), /carries no retryaudit object with source and event_id/);
	assert.equal(f.requests.length, 0);
	const g = fakeN8n({ params: reportParams({ outcome: 'maybe' }), items: [{ json: claimed }] });
	await assert.rejects(execute(g), /Outcome "maybe" is none of done, failed, unknown/);
	assert.equal(g.requests.length, 0);
});

test('report outcome: without a run stamp anywhere, none is sent (retryaudit then asks n8n)', async () => {
	const f = fakeN8n({
		params: reportParams(),
		items: [{ json: { retryaudit: { source: 'shop', event_id: '1042' } } }],
		answers: [{ status: 200, body: { changed: true, status: 'done' } }],
	});
	await execute(f);
	assert.ok(!('run_stamp' in f.requests[0].body));
});

const lookupParams = (source, eventId, extra = {}) => ({
	operation: 'lookUpEvent',
	lookupSource: source,
	lookupEventId: eventId,
	lookupOptions: {},
	...extra,
});

test('look up event: escapes the key, and reads status, holder, version and the audit page', async () => {
	const event = {
		source: 'shop',
		event_id: 'a/b',
		status: 'processing',
		needs_review: true,
		holder_execution_id: '40',
		version: 7,
		deliveries: 2,
		event_url: 'http://ra/events/shop/a%2Fb',
		history: [{ kind: 'claim' }],
		executions: [{}],
	};
	const f = fakeN8n({
		params: lookupParams('shop', 'a/b'),
		answers: [{ status: 200, body: event }],
	});
	const [out] = await execute(f);
	assert.equal(f.requests[0].method, 'GET');
	assert.equal(f.requests[0].url, 'http://ra.test:8080/v1/events/shop/a%2Fb');
	assert.deepEqual(out[0].json, {
		found: true,
		source: 'shop',
		event_id: 'a/b',
		status: 'processing',
		needs_review: true,
		holder_execution_id: '40',
		version: 7,
		deliveries: 2,
		event_url: 'http://ra/events/shop/a%2Fb',
	});
	const g = fakeN8n({
		params: lookupParams('shop', 'a/b', { lookupOptions: { includeHistory: true } }),
		answers: [{ status: 200, body: event }],
	});
	const [withHistory] = await execute(g);
	assert.deepEqual(withHistory[0].json.history, [{ kind: 'claim' }]);
});

test('look up event: "." and ".." go by base64url; an unknown key is found: false', async () => {
	const f = fakeN8n({
		params: lookupParams('shop', '..'),
		answers: [serviceError(404, 'not_found', 'no such event')],
	});
	const [out] = await execute(f);
	assert.equal(f.requests[0].url, 'http://ra.test:8080/v1/events/~/c2hvcA/Li4');
	assert.deepEqual(out[0].json, { found: false, source: 'shop', event_id: '..' });
});

test('description: Claim has two outputs, Act and Skip; the others one', () => {
	const d = new Retryaudit().description;
	assert.equal(d.name, 'retryaudit');
	assert.deepEqual(d.credentials, [{ name: 'retryauditApi', required: true }]);
	const outputs = (operation) =>
		// The expression n8n evaluates, evaluated here the same way.
		new Function('$parameter', `return (${d.outputs.slice(3, -2)});`)({ operation });
	assert.deepEqual(
		outputs('claim').map((o) => o.displayName),
		['Act', 'Skip'],
	);
	assert.equal(outputs('reportOutcome').length, 1);
	assert.equal(outputs('lookUpEvent').length, 1);
});

test("credential: sends the token as a Bearer header; Test asks GET /v1/stats at the service's URL", () => {
	const c = new RetryauditApi();
	assert.equal(c.name, 'retryauditApi');
	assert.equal(c.displayName, 'retryaudit API');
	assert.equal(c.authenticate.properties.headers.Authorization, '=Bearer {{$credentials.token}}');
	assert.equal(c.test.request.url, '/v1/stats');
	assert.equal(c.test.request.method, 'GET');
	const base = new Function('$credentials', `return ${c.test.request.baseURL.slice(3, -2)};`);
	assert.equal(base({ url: 'http://retryaudit:8080//' }), 'http://retryaudit:8080');
	const token = c.properties.find((p) => p.name === 'token');
	assert.equal(token.typeOptions.password, true);
});
