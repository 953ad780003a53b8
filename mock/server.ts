/**
 * `npm run mock`: every operation of the published contract answered from its examples, on PORT (default
 * 4010) and HOST, so that SDKs can be built and tested before handlers exist. Requests pass the server's own
 * checks first (mock-app.ts).
 */
import { loadConfigOrExit } from '../src/config/config.js';
import { buildMockApp } from './mock-app.js';

const config = loadConfigOrExit({ PORT: '4010', ...process.env });
const app = await buildMockApp({ bodyLimit: config.http.bodyLimit, logger: true });
await app.listen({ host: config.host, port: config.port });
