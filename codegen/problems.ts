/** Collects every contract problem so one run reports all of them, each naming its file and location. */
export class Problems {
  readonly list: string[] = [];

  add(file: string, where: string, message: string): void {
    this.list.push(`${file}: ${where}: ${message}`);
  }

  throwIfAny(): void {
    if (this.list.length > 0) {
      throw new ContractError(this.list);
    }
  }
}

export class ContractError extends Error {
  constructor(readonly problems: string[]) {
    super(`The contract has ${problems.length} problem(s):\n  - ${problems.join('\n  - ')}`);
    this.name = 'ContractError';
  }
}
