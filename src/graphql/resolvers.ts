import type {
  CommentResolvers,
  MutationResolvers,
  PostResolvers,
  QueryResolvers,
  Resolvers,
  SubscriptionResolvers,
  UserResolvers,
} from '../../generated/graphql.js';
import type { OperationId } from '../../generated/routes.js';
import { ApiError } from '../errors/registry.js';
import { handlers } from '../operations/index.js';
import type { OperationContext, OperationInput } from '../operations/types.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import { posts } from '../resources/posts.js';
import { ResourceLoaders } from '../resources/loaders.js';
import { users } from '../resources/users.js';
import { callerId } from '../operations/subject.js';
import type { GraphqlContext } from './context.js';
import { checkTypeAccess, decideRootField, readableObject } from './field-access.js';
import { validateInput } from './input-validation.js';

/**
 * The resolvers of schema.graphql. Root fields are decided by the pipeline (field-access.ts) and then run
 * the same handlers as their REST operations (src/operations/); relations read through the request's
 * batched loaders and pass their type's read check. `Required<...>`: a root field without a resolver fails
 * the typecheck.
 */

interface Connection<T> {
  nodes: T[];
  pageInfo: { endCursor: string | null; hasNextPage: boolean };
}

interface Page<T> {
  data: T[];
  page: { next: string | null };
}

/** Runs an operation's handler as REST would, with the resource the pipeline authorized. */
async function run<K extends OperationId>(
  operationId: K,
  input: { params?: object; query?: object; body?: unknown },
  ctx: GraphqlContext,
  resource: ResourceRow | null,
): Promise<unknown> {
  const context: OperationContext = { principal: ctx.principal, resource, deps: ctx.deps.operations, loaders: ctx.loaders };
  const handler = handlers[operationId] as unknown as (input: OperationInput<K>, ctx: OperationContext) => Promise<{ body: unknown }>;
  const full = { params: input.params ?? {}, query: input.query ?? {}, body: input.body } as unknown as OperationInput<K>;
  return (await handler(full, context)).body;
}

/** A REST page as a cursor connection: `endCursor` is what `after` takes for the next page. */
async function connection<T>(
  operationId: OperationId,
  first: number,
  after: string | null | undefined,
  input: { params?: object; query?: object },
  ctx: GraphqlContext,
): Promise<Connection<T>> {
  if (first === 0) return { nodes: [], pageInfo: { endCursor: null, hasNextPage: false } };
  const query = { ...input.query, limit: first, ...(after == null ? {} : { after }) };
  let page: Page<T>;
  try {
    page = (await run(operationId, { params: input.params, query }, ctx, null)) as Page<T>;
  } catch (error) {
    throw asArgumentError(error);
  }
  return { nodes: page.data, pageInfo: { endCursor: page.page.next, hasNextPage: page.page.next !== null } };
}

/** The query parameters a connection's arguments became (`first` is `limit`), for naming them back in errors. */
const ARGUMENT_OF: Readonly<Record<string, string>> = { limit: 'first' };

/** A REST query parameter's error as the field argument's: `details[].path` `/after`, not `/query/after`. */
function asArgumentError(error: unknown): unknown {
  if (!(error instanceof ApiError) || !error.details?.some((detail) => detail.path.startsWith('/query/'))) return error;
  const details = error.details.map((detail) => {
    if (!detail.path.startsWith('/query/')) return detail;
    const [parameter = '', ...rest] = detail.path.slice('/query/'.length).split('/');
    return { ...detail, path: ['', ARGUMENT_OF[parameter] ?? parameter, ...rest].join('/') };
  });
  return new ApiError(error.code, error.message, { details, headers: error.headers, cause: error });
}

/** Filter arguments as query parameters: an argument left out or null filters nothing. */
function filters(args: Readonly<Record<string, unknown>>, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(names.flatMap((name) => (args[name] == null ? [] : [[name, args[name]]])));
}

const Query: Required<QueryResolvers> = {
  async me(_parent, _args, ctx) {
    await decideRootField(ctx, 'Query.me', {});
    if (ctx.principal.kind !== 'user') throw new ApiError('NOT_FOUND', 'The token was not issued to a user.');
    const row = await ctx.loaders.load('user', callerId(ctx.principal));
    return users.viewOf(await readableObject(ctx, 'User', row)) as never;
  },
  async user(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Query.user', args);
    return (await run('getUser', {}, ctx, resource)) as never;
  },
  async users(_parent, args, ctx) {
    await decideRootField(ctx, 'Query.users', args);
    return (await connection('listUsers', args.first, args.after, { query: filters(args, ['role', 'active']) }, ctx)) as never;
  },
  async post(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Query.post', args);
    return (await run('getPost', {}, ctx, resource)) as never;
  },
  async posts(_parent, args, ctx) {
    await decideRootField(ctx, 'Query.posts', args);
    return (await connection('listPosts', args.first, args.after, { query: filters(args, ['status', 'authorId']) }, ctx)) as never;
  },
  async comment(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Query.comment', args);
    return (await run('getComment', {}, ctx, resource)) as never;
  },
};

const Mutation: Required<MutationResolvers> = {
  async createUser(_parent, args, ctx) {
    await decideRootField(ctx, 'Mutation.createUser', args);
    return (await run('createUser', { body: validateInput(ctx, 'createUser', args.input) }, ctx, null)) as never;
  },
  async replaceUser(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.replaceUser', args);
    return (await run('replaceUser', { body: validateInput(ctx, 'replaceUser', args.input) }, ctx, resource)) as never;
  },
  async deleteUser(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.deleteUser', args);
    await run('deleteUser', {}, ctx, resource);
    return true;
  },
  async createPost(_parent, args, ctx) {
    await decideRootField(ctx, 'Mutation.createPost', args);
    return (await run('createPost', { body: validateInput(ctx, 'createPost', args.input) }, ctx, null)) as never;
  },
  async replacePost(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.replacePost', args);
    return (await run('replacePost', { body: validateInput(ctx, 'replacePost', args.input) }, ctx, resource)) as never;
  },
  async deletePost(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.deletePost', args);
    await run('deletePost', {}, ctx, resource);
    return true;
  },
  async createComment(_parent, args, ctx) {
    // The post is loaded and its read rule checked, as for POST /v1/posts/{postId}/comments.
    await decideRootField(ctx, 'Mutation.createComment', args);
    const body = validateInput(ctx, 'createComment', args.input);
    return (await run('createComment', { params: { postId: args.postId }, body }, ctx, null)) as never;
  },
  async replaceComment(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.replaceComment', args);
    return (await run('replaceComment', { body: validateInput(ctx, 'replaceComment', args.input) }, ctx, resource)) as never;
  },
  async deleteComment(_parent, args, ctx) {
    const resource = await decideRootField(ctx, 'Mutation.deleteComment', args);
    await run('deleteComment', {}, ctx, resource);
    return true;
  },
};

type View = Record<string, unknown>;

const User: Pick<Required<UserResolvers>, 'posts'> = {
  async posts(parent, args, ctx) {
    checkTypeAccess(ctx, 'Post');
    return (await connection('listUserPosts', args.first, args.after, { params: { userId: (parent as unknown as View).id } }, ctx)) as never;
  },
};

const Post: Pick<Required<PostResolvers>, 'author' | 'comments' | 'commentCount' | 'published'> = {
  published: (parent) => (parent as unknown as View).status === 'published',
  async commentCount(parent, _args, ctx) {
    checkTypeAccess(ctx, 'Comment');
    return ctx.counts.count('comment', 'postId', String((parent as unknown as View).id));
  },
  async author(parent, _args, ctx) {
    const row = await ctx.loaders.load('user', String((parent as unknown as View).authorId));
    return users.viewOf(await readableObject(ctx, 'User', row)) as never;
  },
  async comments(parent, args, ctx) {
    checkTypeAccess(ctx, 'Comment');
    return (await connection('listPostComments', args.first, args.after, { params: { postId: (parent as unknown as View).id } }, ctx)) as never;
  },
};

const Comment: Pick<Required<CommentResolvers>, 'post' | 'author'> = {
  async post(parent, _args, ctx) {
    const row = await ctx.loaders.load('post', String((parent as unknown as View).postId));
    return posts.viewOf(await readableObject(ctx, 'Post', row)) as never;
  },
  async author(parent, _args, ctx) {
    const row = await ctx.loaders.load('user', String((parent as unknown as View).authorId));
    return users.viewOf(await readableObject(ctx, 'User', row)) as never;
  },
};

/**
 * The events of a topic the subscriber may read, checked one by one when they happen: the type's scope, then
 * its read rule against the resource as it is then (fresh loaders per event: a post's visibility may have
 * changed since the last one).
 */
function readable(
  ctx: GraphqlContext,
  typeName: 'Post' | 'Comment',
  events: AsyncIterableIterator<Readonly<Record<string, unknown>>>,
  wanted: (event: Readonly<Record<string, unknown>>) => boolean = () => true,
): AsyncIterableIterator<Readonly<Record<string, unknown>>> {
  const filtered = readableEvents(ctx, typeName, events, wanted);
  // An async generator waiting for the next event cannot be returned until one comes: ending the source
  // first lets a subscription that ends between events let go of its listener at once.
  const iterator: AsyncIterableIterator<Readonly<Record<string, unknown>>> = {
    next: () => filtered.next(),
    return: async () => {
      await events.return?.();
      return filtered.return(undefined);
    },
    throw: (error: unknown) => filtered.throw(error),
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

async function* readableEvents(
  ctx: GraphqlContext,
  typeName: 'Post' | 'Comment',
  events: AsyncIterableIterator<Readonly<Record<string, unknown>>>,
  wanted: (event: Readonly<Record<string, unknown>>) => boolean,
) {
  try {
    for await (const event of events) {
      if (!wanted(event)) continue;
      // The caller as of now: a role changed since the subscription began is the one that counts.
      const check: GraphqlContext = { ...ctx, principal: ctx.exchange.principal, loaders: new ResourceLoaders(ctx.deps.operations) };
      const allowed = await readableObject(check, typeName, event as ResourceRow).then(
        () => true,
        (error: unknown) => {
          if (error instanceof ApiError) return false;
          throw error;
        },
      );
      if (allowed) yield event;
    }
  } finally {
    await events.return?.();
  }
}

const Subscription: Required<SubscriptionResolvers> = {
  postPublished: {
    async subscribe(_parent, args, ctx) {
      await decideRootField(ctx, 'Subscription.postPublished', args);
      return readable(ctx, 'Post', ctx.deps.events.subscribe('postPublished')) as never;
    },
    resolve: (event: unknown) => event as never,
  },
  commentAdded: {
    async subscribe(_parent, args, ctx) {
      // The post is loaded and its read rule checked, as for GET /v1/posts/{postId}/comments.
      await decideRootField(ctx, 'Subscription.commentAdded', args);
      return readable(ctx, 'Comment', ctx.deps.events.subscribe('commentAdded'), (comment) => comment.postId === args.postId) as never;
    },
    resolve: (event: unknown) => event as never,
  },
};

export const resolvers: Resolvers = { Query, Mutation, Subscription, User, Post, Comment };
