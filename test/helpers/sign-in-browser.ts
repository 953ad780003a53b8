import type { FastifyInstance } from 'fastify';

/**
 * A user at the authorization server's pages, doing what a browser does: it keeps cookies, follows 303s
 * with GET, reads each page's form from the HTML (hidden inputs, ticked boxes) and submits it as the user
 * answers — signs in, and presses the form's first button (Allow on the consent pages). It stops where a
 * browser would leave the server (a redirect to another origin: the client's redirect_uri) or on a page
 * with nothing to submit. It talks over a real socket (fetch) or through Fastify's inject.
 */

export interface Exchange {
  status: number;
  location: string | null;
  setCookies: string[];
  body: string;
}

export interface Outgoing {
  method: 'GET' | 'POST';
  /** Path and query on the server. */
  path: string;
  cookie: string | null;
  form: URLSearchParams | null;
}

export type Send = (request: Outgoing) => Promise<Exchange>;

export interface Credentials {
  email: string;
  password: string;
}

/** Where the visit ended: sent away to another origin, or on a page of the server's with nothing to submit. */
export type Outcome = { redirect: URL; page?: undefined } | { page: Exchange; redirect?: undefined };

const FORM_TYPE = { 'content-type': 'application/x-www-form-urlencoded' };

export function overSocket(origin: string): Send {
  return async ({ method, path, cookie, form }) => {
    const res = await fetch(`${origin}${path}`, {
      method,
      redirect: 'manual',
      headers: { ...(cookie === null ? {} : { cookie }), ...(form === null ? {} : FORM_TYPE) },
      body: form?.toString(),
    });
    return { status: res.status, location: res.headers.get('location'), setCookies: res.headers.getSetCookie(), body: await res.text() };
  };
}

export function throughInject(fastify: FastifyInstance): Send {
  return async ({ method, path, cookie, form }) => {
    const res = await fastify.inject({
      method,
      url: path,
      headers: { ...(cookie === null ? {} : { cookie }), ...(form === null ? {} : FORM_TYPE) },
      payload: form?.toString(),
    });
    const setCookie = res.headers['set-cookie'];
    const location = res.headers.location;
    return {
      status: res.statusCode,
      location: typeof location === 'string' ? location : null,
      setCookies: setCookie === undefined ? [] : Array.isArray(setCookie) ? setCookie : [setCookie],
      body: res.body,
    };
  };
}

export class SignInBrowser {
  readonly #cookies = new Map<string, string>();

  constructor(
    private readonly send: Send,
    /** The server's origin (its ISSUER): a redirect anywhere else leaves it. */
    private readonly origin: string,
  ) {}

  /**
   * Opens the URL (on the server) and answers every form as the user would, until the browser leaves. The
   * user presses each form's first button (Allow), or the button with the value `press` where there is one.
   */
  async visit(url: string, user: Credentials, press?: string): Promise<Outcome> {
    let request: Omit<Outgoing, 'cookie'> = { method: 'GET', path: this.#pathOf(url), form: null };
    for (let step = 0; step < 10; step++) {
      const cookie = this.#cookies.size === 0 ? null : [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
      const res = await this.send({ ...request, cookie });
      this.#store(res.setCookies);
      if (res.status === 303 || res.status === 302) {
        const next = new URL(res.location!, `${this.origin}${request.path}`);
        if (next.origin !== this.origin) return { redirect: next };
        request = { method: 'GET', path: next.pathname + next.search, form: null };
        continue;
      }
      const form = res.status === 200 ? readForm(res.body) : null;
      if (form === null || form.method !== 'post') return { page: res };
      request = { method: 'POST', path: this.#pathOf(form.action), form: answer(form, user, press) };
    }
    throw new Error(`no end after 10 steps at ${request.path}`);
  }

  #pathOf(url: string): string {
    const parsed = new URL(url, this.origin);
    if (parsed.origin !== this.origin) throw new Error(`${url} is not on ${this.origin}`);
    return parsed.pathname + parsed.search;
  }

  #store(setCookies: readonly string[]): void {
    for (const line of setCookies) {
      const [pair] = line.split(';');
      const separator = pair!.indexOf('=');
      const name = pair!.slice(0, separator).trim();
      const value = pair!.slice(separator + 1).trim();
      if (value === '' || /;\s*max-age=0\s*(;|$)/i.test(line)) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
}

export interface HtmlForm {
  method: string;
  action: string;
  /** What the form submits as it stands: hidden and filled-in inputs, ticked boxes. */
  fields: [string, string][];
  /** Names of the inputs the user types into (email, password). */
  typed: string[];
  /** The submit buttons' name and value, in page order. */
  buttons: [string, string][];
}

/** The page's first form, read as a browser reads it. */
export function readForm(body: string): HtmlForm | null {
  const match = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(body);
  if (!match) return null;
  const form = attributes(match[1]!);
  const fields: [string, string][] = [];
  const typed: string[] = [];
  for (const tag of match[2]!.matchAll(/<input\b([^>]*)>/gi)) {
    const input = attributes(tag[1]!);
    const name = input.get('name');
    if (name === undefined) continue;
    const type = (input.get('type') ?? 'text').toLowerCase();
    if (type === 'checkbox' || type === 'radio') {
      if (input.has('checked')) fields.push([name, input.get('value') ?? 'on']);
    } else {
      if (type !== 'hidden') typed.push(name);
      fields.push([name, input.get('value') ?? '']);
    }
  }
  const buttons: [string, string][] = [];
  for (const tag of match[2]!.matchAll(/<button\b([^>]*)>/gi)) {
    const button = attributes(tag[1]!);
    if ((button.get('type') ?? 'submit') === 'submit') buttons.push([button.get('name') ?? '', button.get('value') ?? '']);
  }
  return { method: (form.get('method') ?? 'get').toLowerCase(), action: form.get('action') ?? '', fields, typed, buttons };
}

/** The form as the user submits it: credentials typed in, the chosen button (or the first) pressed. */
function answer(form: HtmlForm, user: Credentials, press: string | undefined): URLSearchParams {
  const typedValues: Record<string, string> = { email: user.email, password: user.password };
  const submitted = new URLSearchParams();
  for (const [name, value] of form.fields) submitted.append(name, form.typed.includes(name) ? (typedValues[name] ?? value) : value);
  const button = form.buttons.find(([, value]) => value === press) ?? form.buttons[0];
  if (button !== undefined && button[0] !== '') submitted.append(button[0], button[1]);
  return submitted;
}

function attributes(source: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const [, name, quoted] of source.matchAll(/([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*"([^"]*)")?/g)) {
    found.set(name!.toLowerCase(), quoted === undefined ? '' : unescapeHtml(quoted));
  }
  return found;
}

function unescapeHtml(value: string): string {
  return value.replace(/&(amp|lt|gt|quot|#39);/g, (_entity, name: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[name]!);
}
