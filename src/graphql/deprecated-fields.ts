import { TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type GraphQLSchema } from 'graphql';

const found = new WeakMap<DocumentNode, readonly string[]>();

/**
 * The deprecated fields a (valid) document asks for, as `Type.field`, each once; worked out once per
 * parsed document (documents are cached by text, so a client's repeated document costs a lookup).
 */
export function deprecatedFieldsOf(schema: GraphQLSchema, document: DocumentNode): readonly string[] {
  let fields = found.get(document);
  if (!fields) {
    const names = new Set<string>();
    const typeInfo = new TypeInfo(schema);
    visit(
      document,
      visitWithTypeInfo(typeInfo, {
        Field() {
          const field = typeInfo.getFieldDef();
          const parent = typeInfo.getParentType();
          if (field?.deprecationReason != null && parent) names.add(`${parent.name}.${field.name}`);
        },
      }),
    );
    fields = [...names];
    found.set(document, fields);
  }
  return fields;
}
