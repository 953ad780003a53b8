import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';

export type Reply = Awaited<ReturnType<FastifyInstance['inject']>>;
export type Fields = Record<string, string> | [string, string][];

/**
 * A browser over `app.inject()`: it sends the cookies it holds, keeps what Set-Cookie tells it (Max-Age=0
 * removes one), and follows 303s whose Location stays on the server. A Location on a client (the
 * redirect_uri) ends the walk, as the browser would leave for the client there.
 */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** Every Set-Cookie this browser received, in order. */
  readonly setCookies: string[] = [];

  constructor(
    private readonly app: FastifyInstance,
    private readonly remoteAddress = '127.0.0.1',
  ) {}

  cookieHeader(): string | undefined {
    if (this.cookies.size === 0) return undefined;
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /** One GET, not followed. */
  async get(url: string): Promise<Reply> {
    return this.keep(await this.app.inject({ method: 'GET', url, remoteAddress: this.remoteAddress, headers: this.headers() }));
  }

  /** One form post, not followed. */
  async post(url: string, fields: Fields): Promise<Reply> {
    const payload = new URLSearchParams(fields).toString();
    const headers = { ...this.headers(), 'content-type': 'application/x-www-form-urlencoded' };
    return this.keep(await this.app.inject({ method: 'POST', url, remoteAddress: this.remoteAddress, headers, payload }));
  }

  /** Follows 303s within the server (relative Locations) and returns the first other answer. */
  async follow(reply: Reply): Promise<Reply> {
    let current = reply;
    for (let hops = 0; current.statusCode === 303 && String(current.headers.location).startsWith('/'); hops++) {
      if (hops > 10) throw new Error('redirect loop');
      current = await this.get(String(current.headers.location));
    }
    return current;
  }

  visit(url: string): Promise<Reply> {
    return this.get(url).then((reply) => this.follow(reply));
  }

  submit(url: string, fields: Fields): Promise<Reply> {
    return this.post(url, fields).then((reply) => this.follow(reply));
  }

  private headers(): Record<string, string> {
    const cookie = this.cookieHeader();
    return cookie === undefined ? {} : { cookie };
  }

  private keep(reply: Reply): Reply {
    const header = reply.headers['set-cookie'];
    for (const line of header === undefined ? [] : Array.isArray(header) ? header : [header]) {
      this.setCookies.push(line);
      const [pair = '', ...attributes] = line.split(';').map((part) => part.trim());
      const separator = pair.indexOf('=');
      const name = pair.slice(0, separator);
      const value = pair.slice(separator + 1);
      if (value === '' || attributes.some((attribute) => attribute.toLowerCase() === 'max-age=0')) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return reply;
  }
}

const ENTITIES: Readonly<Record<string, string>> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };

function unescapeHtml(value: string): string {
  return value.replace(/&(amp|lt|gt|quot|#39);/g, (entity) => ENTITIES[entity]!);
}

/** The page's hidden inputs, name -> value. */
export function hiddenInputs(html: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const match of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) found[unescapeHtml(match[1]!)] = unescapeHtml(match[2]!);
  return found;
}

/** The values of the consent page's scope checkboxes, in page order. */
export function offeredScopes(html: string): string[] {
  return [...html.matchAll(/<input id="scope-\d+" type="checkbox" name="scope" value="([^"]*)" checked>/g)].map((match) => unescapeHtml(match[1]!));
}

/** The value the login form's email field is pre-filled with. */
export function emailField(html: string): string | undefined {
  const match = /<input id="email" name="email" type="email" autocomplete="username" required value="([^"]*)">/.exec(html);
  return match ? unescapeHtml(match[1]!) : undefined;
}

/** The alert a page shows (login failures, error pages), or null. */
export function pageAlert(html: string): string | null {
  const match = /<p class="error" role="alert">([^<]*)<\/p>/.exec(html);
  return match ? unescapeHtml(match[1]!) : null;
}

export function pageHeading(html: string): string | null {
  const match = /<h1>([^<]*)<\/h1>/.exec(html);
  return match ? unescapeHtml(match[1]!) : null;
}

/** The headers every page of the authorization server carries. */
export function expectPageHeaders(reply: Reply): void {
  expect(reply.headers['content-type']).toBe('text/html; charset=utf-8');
  expect(reply.headers['content-security-policy']).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+={0,2}'; form-action 'self'[^;]*; frame-ancestors 'none'; base-uri 'none'$/);
  expect(reply.headers['x-frame-options']).toBe('DENY');
  expect(reply.headers['referrer-policy']).toBe('no-referrer');
  expect(reply.headers['cache-control']).toBe('no-store');
}

/** An error page: status, page headers, never a Location, the heading and the message shown. */
/** Every paragraph of a page, in order, as text. */
export function pageParagraphs(html: string): string[] {
  return [...html.matchAll(/<p\b[^>]*>([^<]*)<\/p>/g)].map((match) => unescapeHtml(match[1]!));
}

/** An error page: its heading, the message in the alert, and after it one instruction, nothing else. */
export function expectErrorPage(reply: Reply, status: number, title: string, message: string, instruction = 'Return to the application you came from and try again.'): void {
  expect({ status: reply.statusCode, heading: pageHeading(reply.body), alert: pageAlert(reply.body) }).toEqual({ status, heading: title, alert: message });
  expectPageHeaders(reply);
  expect(reply.headers.location).toBeUndefined();
  expect(pageParagraphs(reply.body)).toEqual([message, instruction]);
  expect(hiddenInputs(reply.body)).toEqual({});
}

export type PageKind = 'login' | 'consent';

/** Which form the page is: the login page or the consent page, with 200 and the page headers. */
export function expectPage(reply: Reply, kind: PageKind, status = 200): void {
  expect({ status: reply.statusCode, heading: pageHeading(reply.body) }).toEqual({
    status,
    heading: kind === 'login' ? 'Sign in' : expect.stringMatching(/^Allow .+ access\?$/),
  });
  expectPageHeaders(reply);
  expect(reply.headers.location).toBeUndefined();
  expect(reply.body).toContain(`<form method="post" action="/oauth/${kind}">`);
}
