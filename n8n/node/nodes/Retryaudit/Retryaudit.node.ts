import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

import { outputsExpression, properties } from './description';
import type { Routed } from './operations';
import { claim, lookUpEvent, reportOutcome } from './operations';

const operations: Record<
	string,
	(ctx: IExecuteFunctions, i: number, item: INodeExecutionData) => Promise<Routed>
> = { claim, reportOutcome, lookUpEvent };

/**
 * Retryaudit guards a workflow's external action with retryaudit: Claim
 * before it (Act or Skip), Report outcome after it, Look up event to read
 * an event's state.
 */
export class Retryaudit implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'retryaudit',
		name: 'retryaudit',
		icon: {
			light: 'file:../../icons/retryaudit.svg',
			dark: 'file:../../icons/retryaudit.dark.svg',
		},
		group: ['transform'],
		version: 1,
		subtitle:
			'={{ $parameter["operation"] === "reportOutcome" ? "Report outcome" : $parameter["operation"] === "lookUpEvent" ? "Look up event" : "Claim: " + $parameter["source"] }}',
		description:
			'Act on a webhook event once: claim it before the action, report the outcome after',
		usableAsTool: true,
		defaults: {
			name: 'retryaudit',
		},
		inputs: [NodeConnectionTypes.Main],
		outputs: outputsExpression,
		credentials: [
			{
				name: 'retryauditApi',
				required: true,
			},
		],
		properties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as string;
		const run = operations[operation];
		if (!run) throw new NodeOperationError(this.getNode(), `unknown operation ${operation}`);
		const outputs: INodeExecutionData[][] = operation === 'claim' ? [[], []] : [[]];
		for (let i = 0; i < items.length; i++) {
			try {
				const r = await run(this, i, items[i]);
				outputs[r.output].push(r.item);
			} catch (error) {
				const message = (error as Error).message ?? String(error);
				if (this.continueOnFail()) {
					// Never to Act: an item that could not be claimed is skipped.
					const ra: IDataObject = { decision: 'error', reason: message };
					outputs[operation === 'claim' ? 1 : 0].push({
						json: {
							...items[i].json,
							retryaudit: { ...(items[i].json.retryaudit as IDataObject), ...ra },
							error: message,
						},
						pairedItem: { item: i },
					});
					continue;
				}
				// The node's own errors come back as they are, with their item.
				throw new NodeOperationError(this.getNode(), error as Error, { itemIndex: i });
			}
		}
		return outputs;
	}
}
