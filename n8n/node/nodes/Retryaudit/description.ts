import type { INodeProperties } from 'n8n-workflow';

/**
 * outputsExpression gives the Claim operation two outputs, Act and Skip,
 * and the others one.
 */
export const outputsExpression: `={{${string}}}` =
	'={{ $parameter.operation === "claim" || $parameter.operation === undefined ? [{ "type": "main", "displayName": "Act" }, { "type": "main", "displayName": "Skip" }] : [{ "type": "main" }] }}';

const claim = { show: { operation: ['claim'] } };
const report = { show: { operation: ['reportOutcome'] } };
const lookup = { show: { operation: ['lookUpEvent'] } };

const limits: INodeProperties[] = [
	{
		displayName: 'Tries When Busy',
		name: 'tries',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 20 },
		default: 5,
		description:
			'How many requests in all when retryaudit answers 503 (busy, unavailable, a commit whose answer was lost) or 429, each after its Retry-After; then the item fails',
	},
	{
		displayName: 'Timeout',
		name: 'timeout',
		type: 'number',
		typeOptions: { minValue: 1000 },
		default: 10000,
		description: 'Milliseconds to wait for each answer',
	},
];

export const properties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'Claim',
				value: 'claim',
				description:
					'Ask whether this execution may act on the event: Act when it may, Skip when the event is done, held by another execution or cancelled',
				action: 'Claim an event',
			},
			{
				name: 'Look Up Event',
				value: 'lookUpEvent',
				description: "Read an event's status, holder, version and audit page",
				action: 'Look up an event',
			},
			{
				name: 'Report Outcome',
				value: 'reportOutcome',
				description:
					"Say how the action went (done, failed, unknown), for the event the item's claim was about",
				action: 'Report an outcome',
			},
		],
		default: 'claim',
	},

	// Claim
	{
		displayName: 'Source',
		name: 'source',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'shop',
		description:
			'Who sent the event: one name per sender (letters, digits and ._:-). With the event ID it is the key.',
		displayOptions: claim,
	},
	{
		displayName: 'Event ID',
		name: 'eventId',
		type: 'string',
		required: true,
		default: '={{ $json.body.id }}',
		description:
			"The sender's ID of the event (the order number), the same on every redelivery, from the trigger's data",
		displayOptions: claim,
	},
	{
		displayName: 'Options',
		name: 'claimOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: claim,
		options: [
			{
				displayName: 'Delivery ID',
				name: 'deliveryId',
				type: 'string',
				default: '={{ $json.headers?.["x-delivery-id"] ?? $json.headers?.["x-request-id"] ?? "" }}',
				description:
					"The sender's ID of this delivery (a header such as X-Request-ID), which tells a sender's retry from n8n starting twice",
			},
			{
				displayName: 'Fingerprint',
				name: 'fingerprint',
				type: 'string',
				default: '',
				placeholder: '={{ $json.body.total }}:{{ $json.body.currency }}',
				description:
					'The business fields: a later delivery under the same key with other values is flagged (usually a key that is too coarse)',
			},
			{
				displayName: 'Items',
				name: 'items',
				type: 'string',
				default: '',
				placeholder: 'line-1, line-2',
				description:
					'Item keys of a batch event, comma-separated (or an expression giving a list): each is claimed as its own entry',
			},
			...limits,
		],
	},

	// Report outcome
	{
		displayName: 'Outcome',
		name: 'outcome',
		type: 'options',
		options: [
			{
				name: 'Done',
				value: 'done',
				description: 'The external system confirmed the action',
			},
			{
				name: 'Failed',
				value: 'failed',
				description: 'The action certainly did not happen (a refusal before anything was made)',
			},
			{
				name: 'Unknown',
				value: 'unknown',
				description: 'Sent, and no usable answer came: a person is asked',
			},
		],
		default: 'done',
		description:
			'How the action went; an expression may read done, failed or unknown from the item, such as its outcome field',
		displayOptions: report,
	},
	{
		displayName: 'Reference',
		name: 'crmRef',
		type: 'string',
		default: '',
		placeholder: 'CRM-88121',
		description: "The external system's ID of what was made (used with done), kept for links",
		displayOptions: report,
	},
	{
		displayName: 'Reason',
		name: 'reason',
		type: 'string',
		default: '',
		description: 'Why it failed or is unknown, kept in the history',
		displayOptions: report,
	},
	{
		displayName: 'Options',
		name: 'reportOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: report,
		options: [
			{
				displayName: 'Event ID',
				name: 'eventId',
				type: 'string',
				default: '',
				description:
					"Instead of the item's retryaudit.event_id (when the nodes between dropped the claim's data)",
			},
			{
				displayName: 'Item',
				name: 'item',
				type: 'string',
				default: '',
				description: 'The item key of a batch event this report is about',
			},
			{
				displayName: 'Run Stamp',
				name: 'runStamp',
				type: 'string',
				default: '',
				description: "Instead of the item's retryaudit.run_stamp",
			},
			{
				displayName: 'Source',
				name: 'source',
				type: 'string',
				default: '',
				description: "Instead of the item's retryaudit.source",
			},
			...limits,
		],
	},

	// Look up event
	{
		displayName: 'Source',
		name: 'lookupSource',
		type: 'string',
		required: true,
		default: '={{ $json.retryaudit?.source }}',
		description: 'The source of the event',
		displayOptions: lookup,
	},
	{
		displayName: 'Event ID',
		name: 'lookupEventId',
		type: 'string',
		required: true,
		default: '={{ $json.retryaudit?.event_id }}',
		displayOptions: lookup,
	},
	{
		displayName: 'Options',
		name: 'lookupOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: lookup,
		options: [
			{
				displayName: 'Include History',
				name: 'includeHistory',
				type: 'boolean',
				default: false,
				description:
					"Whether to add the newest lines of the event's history (claims, retries, outcomes, errors)",
			},
			...limits,
		],
	},
];
