import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import type { Answer, Limits } from './api';
import { defaultLimits, eventPath, failure, send } from './api';
import { customSet, executionStamp, validStamp } from './stamp';

/** Routed is one output item and the output it goes to (0: Act or the only one; 1: Skip). */
export interface Routed {
	output: 0 | 1;
	item: INodeExecutionData;
}

/** ClaimFields are what a claim sends, named as retryaudit reads them. */
export interface ClaimFields {
	source: string;
	eventId: string;
	executionId: string;
	workflowId: string;
	workflowName: string;
	node: string;
	runStamp: string;
	mode: string;
	fingerprint?: string;
	deliveryId?: string;
	items?: string[];
}

/** claimBody is POST /v1/claims's body; optional fields go only when set. */
export function claimBody(f: ClaimFields): IDataObject {
	const body: IDataObject = {
		source: f.source,
		event_id: f.eventId,
		execution_id: f.executionId,
		workflow_id: f.workflowId,
		workflow_name: f.workflowName,
		node: f.node,
		run_stamp: f.runStamp,
		mode: f.mode,
	};
	if (f.fingerprint) body.fingerprint = f.fingerprint;
	if (f.deliveryId) body.delivery_id = f.deliveryId;
	if (f.items && f.items.length > 0) body.items = f.items;
	return body;
}

/** OutcomeFields are what an outcome report sends. */
export interface OutcomeFields {
	source: string;
	eventId: string;
	executionId: string;
	workflowId: string;
	outcome: string;
	crmRef?: string;
	reason?: string;
	item?: string;
	runStamp?: string;
	mode: string;
}

/** outcomeBody is POST /v1/outcomes's body. */
export function outcomeBody(f: OutcomeFields): IDataObject {
	const body: IDataObject = {
		source: f.source,
		event_id: f.eventId,
		execution_id: f.executionId,
		workflow_id: f.workflowId,
		outcome: f.outcome,
		mode: f.mode,
	};
	if (f.crmRef) body.crm_ref = f.crmRef;
	if (f.reason) body.reason = f.reason;
	if (f.item) body.item = f.item;
	if (f.runStamp) body.run_stamp = f.runStamp;
	return body;
}

/** itemKeys reads the Items option: a list, or comma-separated text. */
export function itemKeys(v: unknown): string[] {
	const list = Array.isArray(v) ? v : typeof v === 'string' ? v.split(',') : v == null ? [] : [v];
	return list.map((x) => String(x).trim()).filter((x) => x !== '');
}

/** text turns a parameter's value into a string ('' for null and undefined). */
export function text(v: unknown): string {
	if (v === null || v === undefined) return '';
	return typeof v === 'string' ? v.trim() : String(v);
}

/** skipReason says in words why an item goes to Skip. */
export function skipReason(key: string, a: IDataObject): string {
	const holder = text(a.holder_execution_id);
	let why: string;
	switch (a.decision) {
		case 'duplicate':
			why = `${key} is done already${holder ? ` (by execution ${holder})` : ''}: nothing to do`;
			break;
		case 'in_progress':
			why = `execution ${holder || '(unknown)'} holds ${key} and its outcome is not known yet: do nothing now`;
			break;
		case 'cancelled':
			why = `a person cancelled ${key}: never act on it`;
			break;
		default:
			why = `retryaudit answered ${text(a.decision) || 'no decision'} for ${key}: do nothing`;
	}
	const note = text(a.lineage_note);
	return note ? `${why} (${note})` : why;
}

function limitsFrom(o: IDataObject): Limits {
	const n = (v: unknown, d: number) =>
		typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : d;
	return {
		tries: Math.floor(n(o.tries, defaultLimits.tries)),
		timeoutMs: n(o.timeout, defaultLimits.timeoutMs),
		maxWaitSeconds: defaultLimits.maxWaitSeconds,
	};
}

function workflowOf(ctx: IExecuteFunctions): { id: string; name: string } {
	const w = ctx.getWorkflow();
	return { id: text(w?.id), name: text(w?.name) };
}

/** fail is the item's error, in words a person can act on. */
function fail(ctx: IExecuteFunctions, i: number, message: string): NodeOperationError {
	return new NodeOperationError(ctx.getNode(), message, { itemIndex: i });
}

function ok(a: Answer): boolean {
	return a.status >= 200 && a.status < 300;
}

/**
 * claim claims one item's event and routes it: Act when retryaudit says
 * to process it (claimed, held, reclaimed), Skip otherwise, with the
 * decision and the reason. The item keeps its data and gains `retryaudit`,
 * which the Report outcome operation reads.
 */
export async function claim(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<Routed> {
	const source = text(ctx.getNodeParameter('source', i));
	const eventId = text(ctx.getNodeParameter('eventId', i));
	if (source === '') throw fail(ctx, i, 'Source is empty: name the sender (such as shop)');
	if (eventId === '') {
		throw fail(
			ctx,
			i,
			"Event ID is empty for this item: its expression found no ID in the item (the sender's id of the event)",
		);
	}
	const opts = ctx.getNodeParameter('claimOptions', i, {}) as IDataObject;
	const prior = item.json.retryaudit as IDataObject | undefined;
	let runStamp: string;
	if (
		prior &&
		typeof prior === 'object' &&
		prior.run_stamp !== undefined &&
		prior.run_stamp !== ''
	) {
		// Made by an earlier node of this run, or replayed by n8n's Retry:
		// kept, so that a Retry presents the stamp of the run it retries.
		if (!validStamp(prior.run_stamp)) {
			throw fail(
				ctx,
				i,
				`the item's retryaudit.run_stamp ${JSON.stringify(prior.run_stamp)} is not a run stamp (1-200 printable characters, no spaces)`,
			);
		}
		runStamp = prior.run_stamp;
	} else {
		runStamp = executionStamp(ctx);
	}
	const executionId = text(ctx.getExecutionId());
	const wf = workflowOf(ctx);
	const body = claimBody({
		source,
		eventId,
		executionId,
		workflowId: wf.id,
		workflowName: wf.name,
		node: ctx.getNode().name,
		runStamp,
		mode: text(ctx.getMode()),
		fingerprint: text(opts.fingerprint),
		deliveryId: text(opts.deliveryId),
		items: itemKeys(opts.items),
	});
	const key = `${source}/${eventId}`;
	const a = await send(ctx, i, { method: 'POST', path: '/v1/claims', body }, limitsFrom(opts));
	if (!ok(a)) throw fail(ctx, i, failure(`claim ${key}`, a));
	if (typeof a.body.process !== 'boolean' || typeof a.body.decision !== 'string') {
		throw fail(
			ctx,
			i,
			`retryaudit answered the claim of ${key} with ${a.status} and no decision: ${JSON.stringify(a.body).slice(0, 300)}`,
		);
	}
	const ra: IDataObject = {
		source,
		event_id: eventId,
		run_stamp: runStamp,
		execution_id: executionId,
		process: a.body.process,
		decision: a.body.decision,
		status: a.body.status,
		delivery: a.body.delivery,
		deliveries: a.body.deliveries,
		holder_execution_id: a.body.holder_execution_id,
		idempotency_key: a.body.idempotency_key,
		event_url: a.body.event_url,
		fingerprint_mismatch: a.body.fingerprint_mismatch,
		items: a.body.items ?? [],
	};
	if (a.body.redelivery_class) ra.redelivery_class = a.body.redelivery_class;
	if (a.body.lineage_note) ra.lineage_note = a.body.lineage_note;
	customSet(ctx, {
		retryaudit_event: `${source}:${eventId}`,
		retryaudit_decision: String(a.body.decision),
	});
	const act = a.body.process === true;
	if (!act) ra.reason = skipReason(key, a.body);
	return {
		output: act ? 0 : 1,
		item: { json: { ...item.json, retryaudit: ra }, pairedItem: { item: i } },
	};
}

const outcomes = ['done', 'failed', 'unknown'];

/**
 * reportOutcome reports how the action went for the event the item's
 * claim was about: source, event id and run stamp come from the item's
 * `retryaudit` object (so that a Retry resumed at a failed node after the
 * claim reports with the stamp it replays), the execution is this one.
 */
export async function reportOutcome(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<Routed> {
	const raw = item.json.retryaudit;
	const ra = (raw && typeof raw === 'object' && !Array.isArray(raw) ? raw : {}) as IDataObject;
	const opts = ctx.getNodeParameter('reportOptions', i, {}) as IDataObject;
	const source = text(opts.source) || text(ra.source);
	const eventId = text(opts.eventId) || text(ra.event_id);
	const runStamp = text(opts.runStamp) || text(ra.run_stamp);
	if (source === '' || eventId === '') {
		throw fail(
			ctx,
			i,
			"the item carries no retryaudit object with source and event_id (the Claim operation's output): keep it " +
				'in the nodes between the claim and this one (in a Code node: return { ...$json, outcome: … }), ' +
				'or set Source and Event ID in the options',
		);
	}
	const outcome = text(ctx.getNodeParameter('outcome', i)).toLowerCase();
	if (!outcomes.includes(outcome)) {
		throw fail(ctx, i, `Outcome ${JSON.stringify(outcome)} is none of done, failed, unknown`);
	}
	const wf = workflowOf(ctx);
	const body = outcomeBody({
		source,
		eventId,
		executionId: text(ctx.getExecutionId()),
		workflowId: wf.id,
		outcome,
		crmRef: text(ctx.getNodeParameter('crmRef', i, '')),
		reason: text(ctx.getNodeParameter('reason', i, '')),
		item: text(opts.item),
		runStamp,
		mode: text(ctx.getMode()),
	});
	const key = `${source}/${eventId}`;
	const a = await send(ctx, i, { method: 'POST', path: '/v1/outcomes', body }, limitsFrom(opts));
	if (!ok(a)) throw fail(ctx, i, failure(`record ${outcome} for ${key}`, a));
	const out: IDataObject = {
		...ra,
		source,
		event_id: eventId,
		outcome,
		changed: a.body.changed,
		status: a.body.status,
		needs_review: a.body.needs_review,
		event_url: a.body.event_url ?? ra.event_url,
	};
	if (runStamp) out.run_stamp = runStamp;
	if (body.crm_ref) out.crm_ref = body.crm_ref;
	return { output: 0, item: { json: { ...item.json, retryaudit: out }, pairedItem: { item: i } } };
}

/** lookUpEvent reads one event: found or not, its status, holder, version and audit page. */
export async function lookUpEvent(ctx: IExecuteFunctions, i: number): Promise<Routed> {
	const source = text(ctx.getNodeParameter('lookupSource', i));
	const eventId = text(ctx.getNodeParameter('lookupEventId', i));
	if (source === '' || eventId === '')
		throw fail(ctx, i, 'Source and Event ID are needed to look an event up');
	const opts = ctx.getNodeParameter('lookupOptions', i, {}) as IDataObject;
	const qs = opts.includeHistory ? { history_limit: 20 } : { history_limit: 1 };
	const a = await send(
		ctx,
		i,
		{ method: 'GET', path: eventPath(source, eventId), qs },
		limitsFrom(opts),
	);
	if (a.status === 404) {
		return {
			output: 0,
			item: { json: { found: false, source, event_id: eventId }, pairedItem: { item: i } },
		};
	}
	if (!ok(a)) throw fail(ctx, i, failure(`look up ${source}/${eventId}`, a));
	return {
		output: 0,
		item: { json: eventSummary(a.body, !!opts.includeHistory), pairedItem: { item: i } },
	};
}

/** eventSummary is what Look up event outputs of GET /v1/events/{source}/{event_id}. */
export function eventSummary(e: IDataObject, withHistory: boolean): IDataObject {
	const out: IDataObject = { found: true };
	for (const k of [
		'source',
		'event_id',
		'status',
		'needs_review',
		'review_reason',
		'holder_execution_id',
		'version',
		'deliveries',
		'idempotency_key',
		'crm_ref',
		'crm_url',
		'event_url',
		'created_at',
		'updated_at',
		'items',
		'history_total',
	]) {
		if (e[k] !== undefined) out[k] = e[k];
	}
	if (withHistory && Array.isArray(e.history)) out.history = e.history;
	return out;
}
