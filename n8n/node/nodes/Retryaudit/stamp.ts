import { randomBytes } from 'crypto';
import type { IExecuteFunctions } from 'n8n-workflow';

import { clock } from './api';

/**
 * A run stamp is `<execution id>:<unix millis>:<random>`, made once per
 * execution and sent with every claim and outcome of it. n8n's Retry
 * replays the output of the nodes that succeeded, so a Retry presents the
 * stamp of the execution it retries (retryaudit reads the id before the
 * first ':' as the stamp's maker); a new execution reusing an old id (after
 * n8n was restored) presents its own.
 */
export const STAMP_KEY = 'retryaudit_run_stamp';

/** validStamp is retryaudit's rule: 1–200 printable characters, no spaces. */
export function validStamp(s: unknown): s is string {
	return typeof s === 'string' && s.length > 0 && s.length <= 200 && /^[\x21-\x7e]+$/.test(s);
}

/** makeStamp makes a new stamp for an execution. */
export function makeStamp(executionId: string): string {
	return `${executionId}:${clock.now()}:${randomBytes(5).toString('hex')}`;
}

// made keeps the stamp this process made for each execution, so that the
// node run again within one execution (Retry On Fail, a loop, another
// Claim node) sends the same one: another stamp under the same id is
// another execution to retryaudit, and is granted nothing the first holds.
const made = new Map<string, string>();
const keep = 10000;

/**
 * executionStamp is this execution's stamp: the one in n8n's custom
 * execution data (made earlier in this execution, or — n8n's Retry copies
 * the custom data of the execution it retries, seen on n8n 2.41.1 — the
 * stamp of that execution, so that a Retry that runs the Claim again
 * presents it), the one this process made for it, or a new one,
 * remembered in both.
 */
export function executionStamp(ctx: IExecuteFunctions): string {
	const id = ctx.getExecutionId() ?? '';
	let stamp = made.get(id);
	if (stamp === undefined) {
		const kept = customGet(ctx, STAMP_KEY);
		stamp = validStamp(kept) ? kept : makeStamp(id);
		made.set(id, stamp);
		if (made.size > keep) made.delete(made.keys().next().value as string);
	}
	customSet(ctx, { [STAMP_KEY]: stamp });
	return stamp;
}

/** forgetStamps is for the tests: a process that starts afresh. */
export function forgetStamps(): void {
	made.clear();
}

// n8n's custom execution data holds strings of at most 255 characters.
const customValueMax = 255;

/**
 * customSet writes n8n's custom execution data where this n8n and its
 * edition take it, and carries on silently where they do not: it is for
 * people reading n8n's executions list, never needed to decide.
 */
export function customSet(ctx: IExecuteFunctions, values: Record<string, string>): boolean {
	try {
		if (!ctx.customData || typeof ctx.customData.set !== 'function') return false;
		for (const [k, v] of Object.entries(values)) {
			ctx.customData.set(k, v.length > customValueMax ? v.slice(0, customValueMax) : v);
		}
		return true;
	} catch {
		return false;
	}
}

function customGet(ctx: IExecuteFunctions, key: string): unknown {
	try {
		return ctx.customData?.get?.(key);
	} catch {
		return undefined;
	}
}
