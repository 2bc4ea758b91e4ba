import type { IDataObject, IExecuteFunctions, IHttpRequestMethods } from 'n8n-workflow';
import { NodeOperationError, sleep } from 'n8n-workflow';

/** CREDENTIAL is the credential type the node calls retryaudit with. */
export const CREDENTIAL = 'retryauditApi';

/**
 * clock is how the node waits and tells time; the unit tests replace it,
 * so that a Retry-After of seconds costs them nothing.
 */
export const clock = {
	sleep: (ms: number): Promise<void> => sleep(ms),
	now: (): number => Date.now(),
};

/** Request is one call to retryaudit's API. */
export interface Request {
	method: IHttpRequestMethods;
	path: string;
	body?: IDataObject;
	qs?: IDataObject;
}

/** Limits bound the waiting: tries in all, each call's timeout, one wait. */
export interface Limits {
	tries: number;
	timeoutMs: number;
	maxWaitSeconds: number;
}

export const defaultLimits: Limits = { tries: 5, timeoutMs: 10000, maxWaitSeconds: 30 };

/** Answer is what retryaudit answered, after the waits. */
export interface Answer {
	status: number;
	body: IDataObject;
	/** tries is how many requests were sent; waited, in seconds, between them. */
	tries: number;
	waited: number;
}

/**
 * retryable answers are those retryaudit asks to send again after
 * Retry-After: 503 (busy, unavailable, unknown — the same request again is
 * safe, since one execution's claim or outcome is answered as it was) and
 * 429 (too many wrong tokens from this address).
 */
export function retryable(status: number): boolean {
	return status === 503 || status === 429;
}

/** retryAfter reads a Retry-After header in seconds (1 when absent or unreadable). */
export function retryAfter(header: unknown): number {
	const value = Array.isArray(header) ? header[0] : header;
	const n = Number(value);
	if (Number.isFinite(n) && n >= 0) return n;
	const at = Date.parse(String(value));
	if (Number.isFinite(at)) return Math.max(0, Math.ceil((at - clock.now()) / 1000));
	return 1;
}

/** baseURL is the credential's service URL without a trailing slash, or '' when it is no http(s) URL. */
export function baseURL(url: unknown): string {
	const u = String(url ?? '')
		.trim()
		.replace(/\/+$/, '');
	return /^https?:\/\/[^/]/i.test(u) ? u : '';
}

/** errorCode and errorMessage read retryaudit's error shape, {"error":{"code","message"}}. */
export function errorCode(body: IDataObject): string {
	const e = body.error as IDataObject | undefined;
	return typeof e?.code === 'string' ? e.code : '';
}

export function errorMessage(body: IDataObject): string {
	const e = body.error as IDataObject | undefined;
	if (typeof e?.message === 'string' && e.message !== '') return e.message;
	if (typeof body.raw === 'string' && body.raw !== '') return body.raw.slice(0, 300);
	return 'no message';
}

function parseBody(body: unknown): IDataObject {
	if (body !== null && typeof body === 'object' && !Array.isArray(body)) return body as IDataObject;
	if (typeof body === 'string' && body !== '') {
		try {
			const v = JSON.parse(body);
			if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as IDataObject;
		} catch {
			// not JSON: kept as text for the message
		}
		return { raw: body };
	}
	return {};
}

/**
 * send makes one call to retryaudit with the credential, sending it again
 * after Retry-After on 503 and 429, and after a second on a transport
 * error (no answer: a resend is as safe as after a 503 unknown), up to
 * limits.tries requests. It returns the last answer, whatever its status;
 * it throws when no answer came at all.
 */
export async function send(
	ctx: IExecuteFunctions,
	i: number,
	req: Request,
	limits: Limits,
): Promise<Answer> {
	const creds = await ctx.getCredentials<{ url: string }>(CREDENTIAL, i);
	const base = baseURL(creds.url);
	if (base === '') {
		throw new NodeOperationError(
			ctx.getNode(),
			`the retryaudit API credential's Service URL ${JSON.stringify(creds.url)} is not an http(s) URL`,
			{ itemIndex: i },
		);
	}
	let waited = 0;
	for (let attempt = 1; ; attempt++) {
		let res: { statusCode: number; headers?: IDataObject; body: unknown };
		try {
			res = await ctx.helpers.httpRequestWithAuthentication.call(ctx, CREDENTIAL, {
				method: req.method,
				url: base + req.path,
				body: req.body,
				qs: req.qs,
				json: true,
				returnFullResponse: true,
				ignoreHttpStatusErrors: true,
				timeout: limits.timeoutMs,
			});
		} catch (error) {
			const why = (error as Error).message ?? String(error);
			if (attempt >= limits.tries) {
				// The cause goes in the description: n8n replaces a message
				// that names a socket error (ECONNREFUSED, …) with its own.
				throw new NodeOperationError(
					ctx.getNode(),
					`retryaudit at ${base} did not answer ${req.method} ${req.path.split('/').slice(0, 3).join('/')} ` +
						`in ${attempt} tries over ${waited} s: is the credential's Service URL where n8n reaches retryaudit?`,
					{ itemIndex: i, description: `the last try: ${why}` },
				);
			}
			await clock.sleep(1000);
			waited += 1;
			continue;
		}
		const answer: Answer = {
			status: res.statusCode,
			body: parseBody(res.body),
			tries: attempt,
			waited,
		};
		if (!retryable(res.statusCode) || attempt >= limits.tries) return answer;
		const wait = Math.min(
			Math.max(retryAfter(res.headers?.['retry-after']), 0),
			limits.maxWaitSeconds,
		);
		await clock.sleep(wait * 1000);
		waited += wait;
	}
}

/** eventPath is GET /v1/events/{source}/{event_id}, for any id. */
export function eventPath(source: string, eventId: string): string {
	// "." and ".." cannot stand in a path (they are resolved away, escaped
	// or not): retryaudit reads them as base64url under ~.
	if (eventId === '.' || eventId === '..' || source === '.' || source === '..') {
		return `/v1/events/~/${b64url(source)}/${b64url(eventId)}`;
	}
	return `/v1/events/${encodeURIComponent(source)}/${encodeURIComponent(eventId)}`;
}

function b64url(s: string): string {
	return Buffer.from(s, 'utf8').toString('base64url');
}

/**
 * failure says what a refused or exhausted answer means, in the service's
 * own words, for the item's error.
 */
export function failure(what: string, a: Answer): string {
	const code = errorCode(a.body);
	const said = `${a.status}${code ? ' ' + code : ''}: ${errorMessage(a.body)}`;
	if (retryable(a.status)) {
		const meaning =
			code === 'unknown'
				? 'its database lost the answer to the commit, so it may have been recorded'
				: a.status === 429
					? 'too many wrong tokens came from this address'
					: code === 'unavailable'
						? 'its database does not answer; nothing was recorded'
						: 'it was busy; nothing was recorded';
		return (
			`retryaudit could not ${what}: ${said} (${a.tries} tries over ${a.waited} s; ${meaning}). ` +
			'Nothing was done: run it again (Retry this execution): the same execution is answered as it was'
		);
	}
	const fields = (a.body.error as IDataObject | undefined)?.fields as IDataObject | undefined;
	const detail = fields
		? ' (' +
			Object.entries(fields)
				.map(([k, v]) => `${k}: ${String(v)}`)
				.join('; ') +
			')'
		: '';
	return `retryaudit refused to ${what}: ${said}${detail}`;
}
