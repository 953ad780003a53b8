import { createHash } from 'node:crypto';

/** Markup that is already safe; everything else interpolated into `html` is escaped. */
export class Html {
  constructor(readonly markup: string) {}
  toString(): string {
    return this.markup;
  }
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (character) => ESCAPES[character]!);
}

type Interpolated = Html | string | number | null | undefined | false | readonly Interpolated[];

function render(value: Interpolated): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.markup;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** A template literal whose interpolations are HTML-escaped (attribute values included: always quote them). */
export function html(strings: TemplateStringsArray, ...values: Interpolated[]): Html {
  let markup = strings[0]!;
  values.forEach((value, i) => {
    markup += render(value) + strings[i + 1]!;
  });
  return new Html(markup);
}

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
main{max-width:28rem;margin:3rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 3px #0002;overflow-wrap:anywhere}
h1{font-size:1.4rem;margin-top:0}
label{display:block;margin:.8rem 0 .2rem;font-weight:600}
input[type=email],input[type=password],input[type=text]{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem;border:1px solid #8a93a6;border-radius:4px}
fieldset{border:1px solid #d0d4dc;border-radius:4px;margin:1rem 0}
fieldset label{font-weight:400;display:flex;gap:.5rem;align-items:flex-start}
button{font-size:1rem;padding:.5rem 1.2rem;margin:1rem .5rem 0 0;border-radius:4px;border:1px solid #2450b2;background:#2f62d6;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#2450b2}
.error{background:#fdecea;border:1px solid #e0867c;padding:.6rem;border-radius:4px}
.notice{background:#e8f3ea;border:1px solid #7cbf8a;padding:.6rem;border-radius:4px}
table{width:100%;border-collapse:collapse}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #e3e6eb}
code{font-size:1.2rem;letter-spacing:.1em}
`;
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

export interface Page {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface PageOptions {
  title: string;
  status?: number;
  /**
   * Origins a form on this page may end up at. CSP `form-action` also governs the redirects that follow a
   * form post (CSP Level 3 §6.4.2), so a page whose form answers with a redirect to a client lists it.
   */
  formTargets?: readonly string[];
}

/**
 * A complete page with the headers every page of the authorization server sends: a CSP that loads nothing
 * from elsewhere and runs no script, no framing (clickjacking on the consent button), no Referer (the URL
 * may carry an interaction id), never cached.
 */
export function page(options: PageOptions, content: Html): Page {
  const formAction = ["'self'", ...(options.formTargets ?? [])].join(' ');
  const csp = [
    "default-src 'none'",
    `style-src 'sha256-${STYLE_HASH}'`,
    `form-action ${formAction}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
  const body = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · Portcullis</title>
<style>${new Html(STYLE)}</style>
</head>
<body>
<main>
${content}
</main>
</body>
</html>
`.markup;
  return {
    status: options.status ?? 200,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': csp,
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    },
    body,
  };
}

/** The origin of a URL, for `formTargets` (a redirect to a private-use scheme needs the scheme). */
export function originOf(uri: string): string {
  const url = new URL(uri);
  return url.origin !== 'null' ? url.origin : `${url.protocol}`;
}
