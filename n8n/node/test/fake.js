// A fake of what n8n gives a node's execute(): parameters, the execution,
// the workflow, custom execution data, and an HTTP helper that records each
// request and answers from a script. No network.
'use strict';

const api = require('../dist/nodes/Retryaudit/api.js');
const stamp = require('../dist/nodes/Retryaudit/stamp.js');

// Waits cost nothing: they are recorded.
const slept = [];
api.clock.sleep = async (ms) => {
	slept.push(ms);
};

/**
 * fakeN8n returns { ctx, requests, custom }: ctx is `this` for execute().
 * answers: [{ status, body, headers }] or Error (no answer), one per request.
 * customData: 'on' (kept in custom), 'none' (the edition has none), 'throws'.
 */
function fakeN8n({
	params = {},
	items = [{ json: {} }],
	executionId = '41',
	mode = 'webhook',
	workflow = { id: 'wfOrders', name: 'Orders to CRM' },
	nodeName = 'Claim',
	answers = [],
	continueOnFail = false,
	customData = 'on',
	credentials = { url: 'http://ra.test:8080/', token: 'secret-token' },
} = {}) {
	const requests = [];
	const custom = {};
	const ctx = {
		getInputData: () => items,
		getNodeParameter: (name, i, fallback) => {
			const v = params[name];
			if (typeof v === 'function') return v(i);
			return v === undefined ? fallback : v;
		},
		getExecutionId: () => executionId,
		getMode: () => mode,
		getWorkflow: () => workflow,
		getNode: () => ({
			id: 'node-1',
			name: nodeName,
			type: 'n8n-nodes-retryaudit.retryaudit',
			typeVersion: 1,
			position: [0, 0],
			parameters: {},
		}),
		continueOnFail: () => continueOnFail,
		getCredentials: async (type) => {
			if (type !== 'retryauditApi') throw new Error(`asked for credential ${type}`);
			return credentials;
		},
		helpers: {
			async httpRequestWithAuthentication(credentialType, options) {
				requests.push({ credentialType, ...options });
				const a = answers.shift();
				if (a === undefined) throw new Error(`no answer scripted for request ${requests.length}`);
				if (a instanceof Error) throw a;
				return { statusCode: a.status, headers: a.headers ?? {}, body: a.body };
			},
		},
	};
	if (customData === 'on') {
		ctx.customData = {
			set: (k, v) => {
				custom[k] = v;
			},
			setAll: (o) => Object.assign(custom, o),
			get: (k) => custom[k],
			getAll: () => ({ ...custom }),
		};
	} else if (customData === 'throws') {
		ctx.customData = {
			set: () => {
				throw new Error('Custom data is not available in this edition');
			},
			setAll: () => {
				throw new Error('Custom data is not available in this edition');
			},
			get: () => undefined,
			getAll: () => ({}),
		};
	}
	return { ctx, requests, custom };
}

/** claimAnswer is a 200 answer of POST /v1/claims. */
function claimAnswer(decision, extra = {}) {
	const process = ['claimed', 'held', 'reclaimed'].includes(decision);
	return {
		status: 200,
		body: {
			process,
			decision,
			status: decision === 'duplicate' ? 'done' : 'processing',
			delivery: 'first_delivery',
			deliveries: 1,
			holder_execution_id: '40',
			idempotency_key: 'ra_key',
			event_url: 'http://ra.test:8080/events/shop/1042',
			fingerprint_mismatch: false,
			items: [],
			...extra,
		},
	};
}

function serviceError(status, code, message, headers = {}) {
	return { status, headers, body: { error: { code, message } } };
}

module.exports = { fakeN8n, claimAnswer, serviceError, slept, forgetStamps: stamp.forgetStamps };
