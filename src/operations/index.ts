import * as auditEvents from './audit-events.js';
import * as clients from './clients.js';
import * as comments from './comments.js';
import { mergePatchOf } from './merge-patch.js';
import * as meta from './meta.js';
import * as posts from './posts.js';
import type { OperationHandlers } from './types.js';
import * as users from './users.js';
import { clients as clientModule } from '../resources/clients.js';
import { comments as commentModule } from '../resources/comments.js';
import { posts as postModule } from '../resources/posts.js';
import { users as userModule } from '../resources/users.js';

/** operationId -> handler. Typed from the contract: a missing handler fails the typecheck. */
export const handlers: OperationHandlers = {
  listUsers: users.listUsers,
  createUser: users.createUser,
  getUser: users.getUser,
  replaceUser: users.replaceUser,
  updateUser: mergePatchOf('replaceUser', users.replaceUser, userModule as never),
  deleteUser: users.deleteUser,
  listUserPosts: posts.listUserPosts,
  listPosts: posts.listPosts,
  createPost: posts.createPost,
  getPost: posts.getPost,
  replacePost: posts.replacePost,
  updatePost: mergePatchOf('replacePost', posts.replacePost, postModule as never),
  deletePost: posts.deletePost,
  listPostComments: comments.listPostComments,
  createComment: comments.createComment,
  getComment: comments.getComment,
  replaceComment: comments.replaceComment,
  updateComment: mergePatchOf('replaceComment', comments.replaceComment, commentModule as never),
  deleteComment: comments.deleteComment,
  listClients: clients.listClients,
  createClient: clients.createClient,
  getClient: clients.getClient,
  replaceClient: clients.replaceClient,
  updateClient: mergePatchOf('replaceClient', clients.replaceClient, clientModule as never),
  deleteClient: clients.deleteClient,
  getRestContract: meta.getRestContract,
  getGraphqlSchema: meta.getGraphqlSchema,
  getAuthorization: meta.getAuthorization,
  getTokenInfo: meta.getTokenInfo,
  listAuditEvents: auditEvents.listAuditEvents,
  listDeprecatedUses: auditEvents.listDeprecatedUses,
};
