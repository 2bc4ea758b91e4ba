import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/**
 * RetryauditApi is where retryaudit answers and its API token. The token
 * goes out as `Authorization: Bearer <token>` and nowhere else; the
 * credential dialog's Test asks GET /v1/stats, which answers 200 to the
 * right token and 401 to any other.
 */
export class RetryauditApi implements ICredentialType {
	name = 'retryauditApi';

	// The product's name is written in lower case, as in the brief and the docs.
	// eslint-disable-next-line n8n-nodes-base/cred-class-field-display-name-miscased
	displayName = 'retryaudit API';

	icon: Icon = { light: 'file:../icons/retryaudit.svg', dark: 'file:../icons/retryaudit.dark.svg' };

	documentationUrl = 'https://github.com/retryaudit/retryaudit/tree/main/n8n/node#credentials';

	properties: INodeProperties[] = [
		{
			displayName: 'Service URL',
			name: 'url',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			required: true,
			placeholder: 'http://retryaudit:8080',
			description:
				"Where n8n reaches retryaudit: its RETRYAUDIT_BASE_URL, or http://retryaudit:8080 in retryaudit's compose file",
		},
		{
			displayName: 'API Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			required: true,
			description:
				'The API token retryaudit printed at its first start (kept in its data folder as token), or RETRYAUDIT_TOKEN',
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.token}}',
			},
		},
	};

	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.url.replace(/\\/+$/, "")}}',
			url: '/v1/stats',
			method: 'GET',
		},
	};
}
