/**
 * Vocabulary for generated accounts. Each seed picks one theme, so an account reads
 * like one business (an outdoor shop, a florist, ...) rather than random words.
 * Names of brands and competitors are invented.
 */
export interface Category {
  /** Title used in campaign names: "Generic – Hiking Boots". */
  readonly title: string;
  /** Lowercase product phrase used in keywords and search terms. */
  readonly product: string;
  /** Ad-group themes: each becomes "<Modifier> <Title>" and prefixes the product. */
  readonly modifiers: readonly string[];
}

export interface Theme {
  readonly key: string;
  readonly brands: readonly string[];
  readonly competitors: readonly string[];
  readonly categories: readonly Category[];
  /** Words a relevant searcher adds ("waterproof", "for women", ...). */
  readonly qualifiers: readonly string[];
  /** Irrelevant intents for this business; `{}` is the product phrase. */
  readonly waste: readonly string[];
  /** Typical cost per click and order value ranges, in EUR. */
  readonly cpc: readonly [number, number];
  readonly orderValue: readonly [number, number];
}

/** Irrelevant intents every business attracts. */
export const COMMON_WASTE: readonly string[] = [
  'free {}',
  '{} jobs',
  'diy {}',
  'used {}',
  '{} reddit',
  'how to repair {}',
  '{} second hand',
  '{} wikipedia',
  '{} youtube',
];

/** Purchase-intent words a keyword is often built with. */
export const KEYWORD_MODIFIERS: readonly string[] = ['buy {}', 'best {}', '{} online', '{} sale', '{} shop', 'cheap {}', 'order {}', '{} store'];

/** Generic relevant qualifiers used by search terms of any theme. */
export const COMMON_QUALIFIERS: readonly string[] = [
  'best',
  'buy',
  'online',
  'sale',
  'near me',
  'reviews',
  'top rated',
  'discount',
  'germany',
  'berlin',
  'delivery',
  'price',
  'offers',
  'shop',
];

export const THEMES: readonly Theme[] = [
  {
    key: 'outdoor',
    brands: ['Alpenpfad', 'Trailhaus', 'Gipfelwerk'],
    competitors: ['bergwelt', 'summitstore', 'wanderkiste', 'trekkingpro'],
    categories: [
      { title: 'Hiking Boots', product: 'hiking boots', modifiers: ['waterproof', 'mens', 'womens', 'lightweight', 'leather'] },
      { title: 'Rain Jackets', product: 'rain jacket', modifiers: ['waterproof', 'mens', 'womens', 'packable', 'breathable'] },
      { title: 'Backpacks', product: 'hiking backpack', modifiers: ['30l', '50l', 'ultralight', 'womens', 'day'] },
      { title: 'Tents', product: 'tent', modifiers: ['2 person', '4 person', 'ultralight', 'family', 'backpacking'] },
      { title: 'Sleeping Bags', product: 'sleeping bag', modifiers: ['down', 'winter', 'lightweight', 'summer', 'kids'] },
      { title: 'Trail Running Shoes', product: 'trail running shoes', modifiers: ['mens', 'womens', 'waterproof', 'wide', 'cushioned'] },
      { title: 'Trekking Poles', product: 'trekking poles', modifiers: ['carbon', 'foldable', 'aluminium', 'adjustable'] },
    ],
    qualifiers: ['gore tex', 'for women', 'for men', 'size 43', 'wide fit', 'black', 'alps', 'winter', 'vegan', 'with warranty'],
    waste: ['how to clean {}', '{} rental', '{} drawing', 'how to waterproof {}'],
    cpc: [0.45, 1.9],
    orderValue: [60, 190],
  },
  {
    key: 'florist',
    brands: ['Bloom & Stem', 'Blütenreich', 'Petalhaus'],
    competitors: ['fleurop', 'blumenwelt', 'rosenbote', 'floraexpress'],
    categories: [
      { title: 'Flower Delivery', product: 'flower delivery', modifiers: ['same day', 'next day', 'birthday', 'berlin', 'express'] },
      { title: 'Roses', product: 'roses', modifiers: ['red', 'long stem', 'white', 'dozen', 'pink'] },
      { title: 'Wedding Flowers', product: 'wedding flowers', modifiers: ['bridal', 'table', 'rustic', 'white', 'budget'] },
      { title: 'Funeral Flowers', product: 'funeral flowers', modifiers: ['wreath', 'sympathy', 'casket', 'white', 'lily'] },
      { title: 'Bouquets', product: 'bouquet', modifiers: ['birthday', 'tulip', 'seasonal', 'luxury', 'thank you'] },
      { title: 'Plants', product: 'house plants', modifiers: ['indoor', 'orchid', 'low light', 'large', 'pet safe'] },
      { title: 'Flower Subscription', product: 'flower subscription', modifiers: ['weekly', 'monthly', 'gift', 'office'] },
    ],
    qualifiers: ['delivered', 'same day', 'for mum', 'for her', 'anniversary', 'fresh', 'letterbox', 'with vase', 'tomorrow', 'order'],
    waste: ['how to draw {}', '{} meaning', '{} wholesale', '{} clipart', 'fake {}'],
    cpc: [0.4, 1.8],
    orderValue: [32, 95],
  },
  {
    key: 'software',
    brands: ['TaskHarbor', 'Planwise', 'Teamloop'],
    competitors: ['taskflow', 'boardly', 'projectory', 'workgrid'],
    categories: [
      { title: 'Project Management', product: 'project management software', modifiers: ['agile', 'small business', 'cloud', 'enterprise', 'simple'] },
      { title: 'Task Tracking', product: 'task tracker', modifiers: ['team', 'online', 'kanban', 'shared', 'simple'] },
      { title: 'Time Tracking', product: 'time tracking app', modifiers: ['employee', 'freelancer', 'project', 'billable', 'team'] },
      { title: 'Kanban Boards', product: 'kanban board', modifiers: ['online', 'team', 'digital', 'agile'] },
      { title: 'Resource Planning', product: 'resource planning tool', modifiers: ['team', 'capacity', 'agency', 'project'] },
      { title: 'Gantt Charts', product: 'gantt chart software', modifiers: ['online', 'project', 'collaborative', 'simple'] },
      { title: 'Team Collaboration', product: 'team collaboration tool', modifiers: ['remote', 'async', 'secure', 'small team'] },
    ],
    qualifiers: ['for teams', 'pricing', 'saas', 'gdpr', 'comparison', 'alternative', 'trial', 'for agencies', 'with api', 'demo'],
    waste: ['{} crack', 'open source {}', '{} tutorial', '{} template excel', '{} certification'],
    cpc: [1.4, 3.9],
    orderValue: [90, 420],
  },
  {
    key: 'coffee',
    brands: ['Röstwerk', 'Bohnenliebe', 'Kaffeekontor'],
    competitors: ['roastbox', 'beanclub', 'kaffeeland', 'crema24'],
    categories: [
      { title: 'Coffee Beans', product: 'coffee beans', modifiers: ['espresso', 'arabica', 'organic', 'decaf', 'single origin'] },
      { title: 'Espresso Machines', product: 'espresso machine', modifiers: ['home', 'portafilter', 'dual boiler', 'compact'] },
      { title: 'Coffee Grinders', product: 'coffee grinder', modifiers: ['burr', 'electric', 'manual', 'espresso'] },
      { title: 'Coffee Subscription', product: 'coffee subscription', modifiers: ['monthly', 'gift', 'office', 'espresso'] },
      { title: 'Filter Coffee', product: 'filter coffee', modifiers: ['ground', 'light roast', 'pour over', 'organic'] },
      { title: 'Coffee Gifts', product: 'coffee gift set', modifiers: ['christmas', 'birthday', 'tasting', 'luxury'] },
      { title: 'Barista Accessories', product: 'barista accessories', modifiers: ['milk jug', 'tamper', 'scale', 'knock box'] },
    ],
    qualifiers: ['fresh roasted', 'fair trade', '1kg', 'whole bean', 'italian', 'strong', 'for beginners', 'direct trade', 'roastery', 'samples'],
    waste: ['how to make {}', '{} calories', 'barista jobs {}', '{} caffeine content'],
    cpc: [0.3, 1.3],
    orderValue: [18, 75],
  },
];
